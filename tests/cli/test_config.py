"""Every primary config composes with every group option; typos and wrong types fail early."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from rpr_nmt.config import CONFIG_DIR, DataConfig, DecodeConfig, ModelConfig, TrainConfig

GROUPS = {
    "data": DataConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}
PUBLIC_NAMES = {
    "data": {"multi30k_en_de", "multi30k_en_fr", "wmt14_en_de", "wmt14_en_fr", "local"},
    "model": {"transformer_tiny", "transformer_small", "transformer_base", "transformer_big"},
}
PRIMARY_EXTRA = {"train": [], "evaluate": ["checkpoint=x.pt"], "translate": ["checkpoint=x.pt"]}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def compose_job(name: str, overrides: list[str]):
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        return compose(name, overrides=PRIMARY_EXTRA[name] + overrides)


def test_public_config_names_exist():
    for group, names in PUBLIC_NAMES.items():
        assert names <= set(options(group))


@pytest.mark.parametrize("primary", ["train", "evaluate", "translate"])
@pytest.mark.parametrize("group", list(GROUPS))
def test_every_primary_composes_with_every_option(primary, group):
    groups_of = {"train": set(GROUPS), "evaluate": {"data", "decode"}, "translate": {"decode"}}
    if group not in groups_of[primary]:
        pytest.skip(f"{primary} has no {group} group")
    for option in options(group):
        cfg = compose_job(primary, [f"{group}={option}"])
        node = cfg[group]
        # Every key of the schema is present and resolves; nothing outside the schema crept in.
        assert set(node.keys()) == set(GROUPS[group].__dataclass_fields__)
        OmegaConf.to_container(node, resolve=True)


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment):
    cfg = compose_job("train", [f"experiment={experiment}"])
    assert cfg.model.d_model > 0


def test_data_root_comes_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RPR_NMT_DATA", str(tmp_path))
    cfg = compose_job("train", ["data=wmt14_en_fr"])
    assert cfg.data.root == f"{tmp_path}/wmt14_enfr"
    cfg = compose_job("train", ["data=local", "data.root=/some/where"])
    assert cfg.data.root == "/some/where"


def test_paper_presets_carry_the_paper_settings():
    base = compose_job("train", ["model=transformer_base"]).model
    big = compose_job("train", ["model=transformer_big"]).model
    for model, (k, shared) in ((base, (16, False)), (big, (8, True))):
        assert model.max_relative_position == k and model.share_relative_across_heads == shared
        assert not model.sinusoidal
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout) == (1024, 16, 4096, 0.3)


@pytest.mark.parametrize(
    "override",
    [
        "model.max_relative_positon=4",  # misspelled key
        "model.max_relative_position=four",  # wrong type
        "train.max_tokens=1.5",  # float for an int
        "data=wmt15_en_de",  # unknown group option
    ],
)
def test_bad_override_fails_at_composition(override):
    with pytest.raises(ConfigCompositionException):
        compose_job("train", [override])


def test_evaluate_takes_one_or_several_checkpoints():
    assert compose_job("evaluate", []).checkpoint == "x.pt"
    cfg = compose_job("evaluate", ["checkpoint=[a.pt,b.pt]", "split=val"])
    assert list(cfg.checkpoint) == ["a.pt", "b.pt"] and cfg.split == "val"
    assert cfg.data is None
