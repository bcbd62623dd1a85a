"""The position methods through training: every positions= group composes with its meaning,
resumes exactly, and trains, evaluates and translates through the command lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.config import position_methods
from rpr_nmt.train import train
from rpr_nmt.train.setup import check_model_settings
from tests.conftest import command_env, compose_command
from tests.forkrun import run_module

from .conftest import compose_config, run_train, tiny_overrides, train_curve

# Each group's (absolute, relative) methods; the published names keep their meaning and k.
GROUPS = {
    "absolute": (("sinusoid", "none"), 0),
    "relative": (("none", "shaw"), None),  # k: the model's
    "both": (("sinusoid", "shaw"), None),
    "relative_k4": (("none", "shaw"), 4),
    "relative_k16": (("none", "shaw"), 16),
    "rope": (("none", "rope"), 0),
    "alibi": (("none", "alibi"), 0),
    "t5": (("none", "t5"), 0),
    "learned": (("learned", "none"), 0),
    "none": (("none", "none"), 0),
}
NEW = ["rope", "alibi", "t5", "learned", "none"]


def test_the_groups_are_the_ones_listed():
    on_disk = {p.stem for p in (Path(CONFIG_DIR) / "positions").glob("*.yaml")}
    assert on_disk == set(GROUPS)


@pytest.mark.parametrize("model", ["transformer_tiny", "transformer_small", "transformer_big"])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_group_composes_over_every_model_with_its_meaning(group, model):
    cfg = to_job_config(compose_command([f"model={model}", f"positions={group}"]))
    methods, k = GROUPS[group]
    check_model_settings(cfg.model)
    assert position_methods(cfg.model) == methods
    plain = to_job_config(compose_command([f"model={model}"]))
    assert cfg.model.max_relative_position == (
        plain.model.max_relative_position if k is None else k
    )


@pytest.mark.parametrize("group", NEW)
def test_resume_reproduces_the_loss_curve(group, corpus, cache_dir, tmp_path):
    common = (f"positions={group}", "train.valid_every=3", "train.save_every=2")
    common += ("train.valid_bleu=false", "train.evaluate_at_end=false")
    straight = train(
        compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "a"
    )
    train(compose_config(corpus, cache_dir, *common, "train.max_steps=4"), tmp_path / "b")
    resumed = train(compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "b")
    assert resumed["session_steps"] == 2
    assert train_curve(tmp_path / "a") == train_curve(tmp_path / "b")  # exactly
    assert resumed["final_train_loss"] == straight["final_train_loss"]


# The command lines for rope (a rotation in the cache) and t5 (a learned bias) in every run; the
# other new groups with -m slow (about 10 s each).
CLI_GROUPS = [
    "rope",
    "t5",
    *(pytest.param(g, marks=pytest.mark.slow) for g in NEW[1:] if g != "t5"),
]


@pytest.mark.parametrize("group", CLI_GROUPS)
def test_the_command_lines_train_evaluate_and_translate(group, corpus, cache_dir, tmp_path):
    run_dir = tmp_path / "run"
    args = tiny_overrides(corpus, cache_dir, run_dir, f"positions={group}", "train.max_steps=2")
    done = run_train([*args, "train.valid_every=2", "train.valid_bleu_sentences=4"])
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["steps"] == 2 and summary["test_bleu"] is not None
    env = command_env(OMP_NUM_THREADS="1")
    checkpoint = run_dir / "checkpoints" / "last.pt"
    evaluate = run_module(
        "rpr_nmt.cli.evaluate",
        [f"checkpoint={checkpoint}", "decode.max_len_b=4", f"hydra.run.dir={tmp_path / 'eval'}"],
        cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert evaluate.returncode == 0, evaluate.stderr[-3000:]
    assert json.loads((tmp_path / "eval" / "eval_test.json").read_text())["sentences"] == 16
    translate = run_module(
        "rpr_nmt.cli.translate",
        [f"checkpoint={checkpoint}", "decode.max_len_b=4",
         f"hydra.run.dir={tmp_path / 'translate'}"],
        cwd=tmp_path, env=env, stdin="the red dog\na small cat runs\n", timeout=120,
    )  # fmt: skip
    assert translate.returncode == 0, translate.stderr[-3000:]
    assert len(translate.stdout.splitlines()) == 2


NEW_FIELDS = ("absolute_positions", "max_positions", "relative_positions", "rope_base")
NEW_FIELDS += ("rope_dims", "rope_layout", "t5_num_buckets", "t5_max_distance")


@pytest.mark.parametrize("group", ["relative", "both"])
def test_a_run_from_before_the_axes_resumes_exactly(group, corpus, cache_dir, tmp_path):
    """Its checkpoints lack the position axes' fields: they read as sinusoid + shaw, the composed
    config matches them, and the loss curve goes on as if never interrupted."""
    common = (f"positions={group}", "train.valid_every=3", "train.save_every=2")
    common += ("train.valid_bleu=false", "train.evaluate_at_end=false")
    train(compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "a")
    train(compose_config(corpus, cache_dir, *common, "train.max_steps=4"), tmp_path / "b")
    for path in (tmp_path / "b" / "checkpoints").glob("*.pt"):
        if path.is_symlink():
            continue
        raw = torch.load(path, weights_only=True)
        for key in NEW_FIELDS:  # as written before the axes existed (links: seen twice)
            raw["config"]["model"].pop(key, None)
        torch.save(raw, path)
    last = torch.load(tmp_path / "b" / "checkpoints" / "last.pt", weights_only=True)
    assert not set(NEW_FIELDS) & set(last["config"]["model"])
    resumed = train(compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "b")
    assert resumed["session_steps"] == 2
    assert train_curve(tmp_path / "a") == train_curve(tmp_path / "b")
