"""Overrides Hydra would refuse in several lines with exit status 1, or take and then ignore:
refused before Hydra runs, in one line naming the override and what to write instead."""

from __future__ import annotations

import pytest

from rpr_nmt.cli.override_errors import override_problem
from rpr_nmt.config import EvaluateJobConfig, ScoreJobConfig, TrainJobConfig, TranslateJobConfig
from tests.conftest import REPO
from tests.forkrun import run_module


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("train.lr=abc", "train.lr takes a number, not 'abc': write e.g. train.lr="),
        ("train.max_steps=1.5", "train.max_steps takes a whole number"),
        ("train.seed=1,x", "train.seed takes a whole number, not 'x'"),
        ("train.compile=maybe", "train.compile takes true or false"),
        ("model.d_modle=64", "(did you mean model.d_model?)"),
        ("+model.d_modle=64", "model.d_modle: not a setting"),  # else added and ignored
        ("+train.foo=1", "train.foo: not a setting"),
        ("positions=rel", "no positions option 'rel'"),
        ("experiment=ablate_kk", "did you mean experiment=ablate_k?"),
        ("~model.dropout", "a setting cannot be deleted"),
        ("data.root=~/corpus", "\"data.root='~/corpus'\""),
        ("positions=null", "positions takes an option, not null (write positions=none;"),
        ("positions=rope,null", "not null"),
        ("train.seed=1,2", "several values are a sweep: add -m"),
        ("experiment=ablate_k,ablate_terms", "add -m"),
    ],
)  # fmt: skip
def test_a_bad_train_override_is_named_in_one_line(override, named):
    problem = override_problem(
        TrainJobConfig, ["rpr-nmt-train", "model=transformer_tiny", override]
    )
    assert problem is not None and problem.startswith(f"{override}: ") and named in problem
    assert "\n" not in problem


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "experiment=ablate_k", "train.seed=1,2,3", "train=cpu_short"],
        ["model.max_relative_position=4", "positions=relative_k4", "train.lr=2e-3"],
        ["train.max_time_minutes=null", "data.train_splits=[train,val]", "++model.d_model=64"],
        ["hydra/launcher=joblib_cpu", "hydra.launcher.n_jobs=2", "+hydra.job.env_set.A=1"],
        ["data.hub_splits.x=y", "train.lr=${train.warmup_steps}", "--cfg", "job"],
        ["-m", "train.seed=range(1,3)", "data.root='~/corpus'"],
    ],
)  # fmt: skip
def test_good_train_overrides_pass(argv):
    assert override_problem(TrainJobConfig, ["rpr-nmt-train", *argv]) is None


@pytest.mark.parametrize("schema", [EvaluateJobConfig, TranslateJobConfig, ScoreJobConfig])
def test_the_inference_commands_refuse_the_same_way(schema):
    head = ["prog", "checkpoint='runs/x/a=1,b=2/last.pt'", "decode=greedy", "weights=raw"]
    assert override_problem(schema, head) is None
    assert "decode.beam_size takes a whole number" in override_problem(
        schema, [*head, "decode.beam_size=abc"]
    )
    assert "did you mean decode.beam_size?" in override_problem(
        schema, [*head, "decode.beem_size=4"]
    )
    assert "no decode option 'greedyy'" in override_problem(schema, ["prog", "decode=greedyy"])


def test_a_sweep_printed_with_cfg_is_one_line_not_a_traceback():
    problem = override_problem(
        TrainJobConfig, ["rpr-nmt-train", "-m", "experiment=ablate_k", "--cfg", "job"]
    )
    assert problem is not None and "leave out -m" in problem


def test_a_sweep_without_m_printed_with_cfg_asks_for_one_value():
    for cfg in ("job", "hydra"):
        problem = override_problem(
            TrainJobConfig,
            ["rpr-nmt-train", "experiment=ablate_k", "train.seed=1,2", "--cfg", cfg],
        )
        assert problem == "train.seed=1,2: --cfg prints one job's config: give train.seed one value"


def test_rpr_nmt_train_refuses_a_wrong_type_with_exit_2_before_any_data(tmp_path):
    cache = tmp_path / "cache"
    args = ["train.lr=abc", f"data.cache_dir={cache}", f"hydra.run.dir={tmp_path}/run"]
    done = run_module("rpr_nmt.cli.train", args, cwd=REPO, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("rpr-nmt-train: error: train.lr=abc: train.lr takes a number")
    assert done.stderr.count("\n") == 1
    assert not cache.exists() and not (tmp_path / "run").exists()
