"""The settings that place a run rather than change it are read from one list: the one Hydra
composes into the run folder's name (configs/hydra/train.yaml's exclude_keys)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from rpr_nmt.cli.config_store import CONFIG_DIR, register_configs
from rpr_nmt.config import override_key, placement_keys


def test_placement_keys_are_the_keys_the_run_folder_name_leaves_out():
    register_configs()
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="train", return_hydra_config=True)
    composed = set(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert placement_keys() == composed
    assert {"train.max_steps", "train.evaluate_test"} <= placement_keys()


@pytest.mark.parametrize(
    "text, key",
    [
        ("train.lr=0.003", "train.lr"),
        ("+train.seed=2", "train.seed"),
        ("++model.k=4", "model.k"),
        ("~model.alibi", "model.alibi"),
        ("data.root=a=b", "data.root"),
        ("experiment=ablate_k", "experiment"),
    ],
)
def test_override_key_is_the_key_without_hydra_prefixes(text, key):
    assert override_key(text) == key
