"""The settings that place a run rather than change it are read from one list: the one Hydra
composes into the run folder's name (configs/hydra/train.yaml's exclude_keys)."""

from __future__ import annotations

import pytest

from rpr_nmt.config import override_key, placement_keys
from tests.conftest import compose_command


def test_placement_keys_are_the_keys_the_run_folder_name_leaves_out():
    cfg = compose_command(hydra=True)
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
