"""Exact resume: N updates straight equal N/2 updates, then a rerun extended to N (CPU, fp32); a
resume in another arithmetic is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rpr_nmt.checkpoint import CheckpointError, TrainingState
from rpr_nmt.config import TrainConfig
from rpr_nmt.data import DataError
from rpr_nmt.train import train
from rpr_nmt.train.provenance import read_sessions
from rpr_nmt.train.setup import check_resumed_arithmetic

from .conftest import compose_config, train_curve


def test_resumed_losses_equal_an_uninterrupted_run(corpus, cache_dir, tmp_path):
    # Validation every 3 updates: the interrupted run also validates at its end (update 4), which
    # must not disturb the random state the resumed run continues from.
    common = ("train.valid_every=3", "train.save_every=2", "train.valid_bleu=false")
    common += ("train.evaluate_at_end=false",)
    straight = train(
        compose_config(corpus, cache_dir, *common, "train.max_steps=8"), tmp_path / "a"
    )
    first = train(compose_config(corpus, cache_dir, *common, "train.max_steps=4"), tmp_path / "b")
    assert first["steps"] == 4
    # A crash after update 4's checkpoint: updates 5-6 were logged, never saved, and the last
    # line was torn. The resumed run logs them again, from the checkpoint, once.
    with (tmp_path / "b" / "metrics.jsonl").open("a") as log:
        for step in (5, 6):
            log.write(json.dumps({"kind": "train", "step": step, "loss": -1.0}) + "\n")
        log.write('{"kind": "train", "st')
    resumed = train(compose_config(corpus, cache_dir, *common, "train.max_steps=8"), tmp_path / "b")
    assert resumed["steps"] == 8 and resumed["session_steps"] == 4
    a, b = train_curve(tmp_path / "a"), train_curve(tmp_path / "b")
    assert [s for s, _ in a] == list(range(1, 9)) == [s for s, _ in b]
    assert a == b  # exactly equal, not approximately
    assert resumed["final_train_loss"] == straight["final_train_loss"]
    assert resumed["best_valid_loss"] == straight["best_valid_loss"]

    # A finished run rerun with the same max_steps trains nothing and keeps its checkpoint.
    again = train(compose_config(corpus, cache_dir, *common, "train.max_steps=8"), tmp_path / "b")
    assert again["steps"] == 8 and again["session_steps"] == 0

    # Another model in the same run directory is refused with a clear message.
    other = compose_config(corpus, cache_dir, *common, "train.max_steps=9", "model.d_ff=48")
    with pytest.raises(CheckpointError, match=r"another model config \(differs in \['d_ff'\]\)"):
        train(other, tmp_path / "b")


def test_arithmetic_2_resumes_exactly_and_trains_its_own_numbers(corpus, cache_dir, tmp_path):
    """train.arithmetic=2 in bf16: its NumPy masks come from torch's saved RNG state, so a resumed
    run equals an uninterrupted one; and it trains other numbers than arithmetic 1."""
    common = ("train.save_every=3", "train.valid_bleu=false", "train.evaluate_at_end=false",
              "train.precision=bf16", "model.dropout=0.3")  # fmt: skip
    two = (*common, "train.arithmetic=2")
    train(compose_config(corpus, cache_dir, *two, "train.max_steps=6"), tmp_path / "a")
    train(compose_config(corpus, cache_dir, *two, "train.max_steps=3"), tmp_path / "b")
    train(compose_config(corpus, cache_dir, *two, "train.max_steps=6"), tmp_path / "b")
    one = (*common, "train.arithmetic=1")
    train(compose_config(corpus, cache_dir, *one, "train.max_steps=6"), tmp_path / "one")
    a, b, one = (train_curve(tmp_path / name) for name in ("a", "b", "one"))
    assert a == b and len(a) == 6  # exactly equal, not approximately
    assert a[0] != one[0] and a != one  # the masks differ from the first update on


@pytest.mark.parametrize(
    "trained, now, fix",
    [
        (("bf16", 2), ("bf16", 1), "train.arithmetic=2"),
        (("bf16", 1), ("bf16", 2), "train.arithmetic=1"),
        (("fp32", 1), ("bf16", 2), "train.arithmetic=1"),  # a precision change that changes it
        (("fp32", 2), ("bf16", 2), "train.arithmetic=1"),  # fp32 trained in 1 whatever it said
        (("bf16", 2), ("fp32", 1), "train.arithmetic=2 train.precision=bf16"),
        (("bf16", 2), ("fp32", 2), "train.arithmetic=2 train.precision=bf16"),
    ],
)  # fmt: skip
def test_a_resume_in_another_arithmetic_is_refused_naming_both_and_the_fix(trained, now, fix):
    # Probe: bf16 with train.arithmetic=2 resumed with 1 trained on and recorded "1+2", which every
    # report refuses and nothing mends.
    path = Path("runs/one/checkpoints/last.pt")
    saved = TrainConfig(precision=trained[0], arithmetic=trained[1])
    with pytest.raises(CheckpointError) as refused:
        check_resumed_arithmetic(saved, *now, path)
    message = str(refused.value)
    before, after = (1 if precision == "fp32" else value for precision, value in (trained, now))
    assert message.startswith(f"{path} trained in arithmetic {before} so far ({trained[0]}, ")
    assert f"continue in arithmetic {after} ({now[0]}, train.arithmetic={now[1]})" in message
    assert f"rerun with {fix}, or train into a new run folder" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "trained, now",
    [
        (("fp32", 2), ("fp32", 1)),  # fp32 computes the same numbers under either
        (("fp32", 1), ("fp32", 2)),
        (("bf16", 1), ("fp32", 2)),  # a precision change alone (warned, recorded)
        (("fp32", 1), ("bf16", 1)),
        (("bf16", 2), ("bf16", 2)),
    ],
)
def test_a_resume_in_the_same_arithmetic_passes(trained, now):
    saved = TrainConfig(precision=trained[0], arithmetic=trained[1])
    check_resumed_arithmetic(saved, *now, Path("last.pt"))


def test_a_checkpoint_from_before_train_arithmetic_trained_in_1():
    config = {"train": {"precision": "bf16"}}  # no arithmetic key: it trained in 1
    state = TrainingState.from_dict({"model": {}, "bpe_model": b"", "config": config}, "old.pt")
    check_resumed_arithmetic(state.config.train, "bf16", 1, Path("old.pt"))
    with pytest.raises(CheckpointError, match=r"old.pt trained in arithmetic 1 so far \(bf16, "):
        check_resumed_arithmetic(state.config.train, "bf16", 2, Path("old.pt"))


def test_the_trainer_refuses_another_arithmetic_before_it_writes_or_trains(
    corpus, cache_dir, tmp_path
):
    """fp32 trains in 1 (whatever train.arithmetic says): resumed in bf16 with arithmetic 2, the
    run is refused and left as it was; resumed in fp32 with train.arithmetic=1, it continues."""
    quiet = ("train.save_every=1", "train.valid_bleu=false", "train.evaluate_at_end=false")
    run = tmp_path / "run"
    fp32 = (*quiet, "train.precision=fp32")
    train(compose_config(corpus, cache_dir, *fp32, "train.arithmetic=2", "train.max_steps=1"), run)
    files = _contents(run)
    bf16 = compose_config(corpus, cache_dir, *quiet, "train.precision=bf16", "train.arithmetic=2",
                          "train.max_steps=2")  # fmt: skip
    with pytest.raises(CheckpointError) as refused:
        train(bf16, run)
    message = str(refused.value)
    assert message.startswith(f"{run / 'checkpoints' / 'last.pt'} trained in arithmetic 1 so far")
    assert "rerun with train.arithmetic=1, or train into a new run folder" in message
    assert _contents(run) == files  # no session line, no checkpoint, no metrics
    resumed = train(compose_config(corpus, cache_dir, *fp32, "train.max_steps=2"), run)
    assert resumed["steps"] == 2 and [s["arithmetic"] for s in read_sessions(run)] == [1, 1]


def test_arithmetic_null_is_the_newest_for_a_new_run_and_a_resumed_runs_own(
    corpus, cache_dir, tmp_path
):
    """train.arithmetic=null: a new bf16 run trains in 2 (1 in fp32); a run that trained in 1
    resumes in 1 (a published run rerun by its own command), one that trained in 2 in 2."""
    quiet = ("train.save_every=1", "train.valid_bleu=false", "train.evaluate_at_end=false",
             "train.precision=bf16")  # fmt: skip
    auto = "train.arithmetic=null"
    for trained, name in ((None, "new"), (1, "one"), (2, "two")):
        first = auto if trained is None else f"train.arithmetic={trained}"
        train(
            compose_config(corpus, cache_dir, *quiet, first, "train.max_steps=1"), tmp_path / name
        )
        train(compose_config(corpus, cache_dir, *quiet, auto, "train.max_steps=2"), tmp_path / name)
        sessions = [s["arithmetic"] for s in read_sessions(tmp_path / name)]
        assert sessions == [trained or 2] * 2
        saved = torch.load(tmp_path / name / "checkpoints" / "last.pt", weights_only=False)
        assert saved["config"]["train"]["arithmetic"] == (trained or 2)  # resolved, never null
    fp32 = compose_config(corpus, cache_dir, *quiet, auto, "train.precision=fp32",
                          "train.max_steps=1")  # fmt: skip
    train(fp32, tmp_path / "fp32")
    assert [s["arithmetic"] for s in read_sessions(tmp_path / "fp32")] == [1]


@pytest.mark.parametrize("saved_as", ["recorded", "before_it_was_recorded"])
def test_the_trainer_refuses_another_world_size_before_it_writes_or_trains(
    corpus, cache_dir, tmp_path, saved_as
):
    """A checkpoint of 2 processes resumed by 1 would train some batches twice: refused, and the
    run left as it was. Older checkpoints' iterator states lack the world size; their one random
    state per rank still tells it."""
    quiet = ("train.save_every=1", "train.valid_bleu=false", "train.evaluate_at_end=false")
    run = tmp_path / "run"
    train(compose_config(corpus, cache_dir, *quiet, "train.max_steps=1"), run)
    last = run / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    if saved_as == "recorded":
        state["data_state"]["world_size"] = 2
    else:
        state["data_state"].pop("world_size", None)
        state["rng_per_rank"] = state["rng_per_rank"] * 2
    torch.save(state, last)
    files = _contents(run)
    with pytest.raises(DataError) as refused:
        train(compose_config(corpus, cache_dir, *quiet, "train.max_steps=2"), run)
    message = str(refused.value)
    assert "saved by 2 processes, now 1" in message
    assert "resume with the same number of processes (torchrun --nproc_per_node 2)" in message
    assert _contents(run) == files  # no session line, no checkpoint, no metrics


def test_an_iterator_state_without_a_world_size_resumes_in_the_same_one(
    corpus, cache_dir, tmp_path
):
    quiet = ("train.save_every=1", "train.valid_bleu=false", "train.evaluate_at_end=false")
    run = tmp_path / "run"
    train(compose_config(corpus, cache_dir, *quiet, "train.max_steps=1"), run)
    last = run / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    state["data_state"].pop("world_size", None)
    torch.save(state, last)
    resumed = train(compose_config(corpus, cache_dir, *quiet, "train.max_steps=2"), run)
    assert resumed["steps"] == 2 and resumed["session_steps"] == 1


def _contents(run: Path) -> dict[Path, bytes]:
    """Every file of a run folder and its bytes, but the lock file (a refused run takes it too)."""
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "train.lock"}
