"""Trainer behaviour in-process: time limit and stop requests through an injected clock and stop
flag (no dependence on how fast this machine is), impossible settings."""

from __future__ import annotations

import json
import logging

import pytest

from rpr_nmt import precision
from rpr_nmt.checkpoint import load_checkpoint
from rpr_nmt.precision import Bf16Support
from rpr_nmt.train import SettingsError, Trainer, train

from .conftest import compose_config, train_curve

QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false")


class TickingClock:
    """A clock that advances `tick` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


class StopAfter:
    """A stop request that turns True once the trainer has done `steps` updates."""

    def __init__(self, steps: int) -> None:
        self.steps, self.trainer = steps, None

    @property
    def requested(self) -> bool:
        return self.trainer is not None and self.trainer.step >= self.steps


def test_time_limit_stops_saves_and_finishes(corpus, cache_dir, tmp_path):
    config = compose_config(
        corpus, cache_dir, "train.max_steps=1000", "train.max_time_minutes=0.5", *QUIET
    )
    # Every reading of the clock is a minute later: the limit has passed before the first update,
    # which still completes (an update is never cut short), then the run stops.
    summary = Trainer(config, tmp_path / "run", clock=TickingClock(60.0)).run()
    assert summary["stopped_by"] == "time_limit" and summary["steps"] == 1
    assert summary["best_valid_loss"] is not None  # validated at the end
    assert (tmp_path / "run" / "checkpoints" / "step_0000001.pt").is_file()
    assert json.loads((tmp_path / "run" / "train_summary.json").read_text())["steps"] == 1


def test_time_limit_counts_the_whole_run_across_resumes(corpus, cache_dir, tmp_path):
    config = compose_config(corpus, cache_dir, "train.max_steps=2", *QUIET)
    first = Trainer(config, tmp_path / "run", clock=TickingClock(1.0)).run()
    assert first["steps"] == 2 and first["train_tokens"] > 0
    saved = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt").progress.run_seconds
    assert saved > 0
    # The first session took longer than this limit: a rerun must not train another session.
    limit = saved / 60 / 2
    config = compose_config(
        corpus, cache_dir, "train.max_steps=1000", f"train.max_time_minutes={limit}", *QUIET
    )
    again = Trainer(config, tmp_path / "run", clock=TickingClock(1.0)).run()
    assert again["stopped_by"] == "time_limit" and again["steps"] == 2
    assert again["session_steps"] == 0
    # Whole-run figures survive a session that trained nothing.
    assert again["train_tokens"] == first["train_tokens"]
    assert again["train_tokens_per_sec"] == pytest.approx(first["train_tokens_per_sec"])
    assert again["wall_seconds"] >= first["wall_seconds"]


def test_stop_request_finishes_the_update_saves_and_stops(corpus, cache_dir, tmp_path):
    config = compose_config(
        corpus, cache_dir, "train.max_steps=100000", "train.valid_every=100000",
        "train.save_every=100000", *QUIET,
    )  # fmt: skip
    stop = StopAfter(3)
    trainer = stop.trainer = Trainer(config, tmp_path / "run", stop=stop)
    summary = trainer.run()
    assert summary["stopped_by"] == "signal" and summary["steps"] == 3
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt").step == 3
    assert "test_bleu" not in summary  # a stopped run skips the final evaluation


def test_a_stop_during_data_preparation_trains_and_saves_nothing(
    corpus, cache_dir, tmp_path, monkeypatch
):
    """Ctrl-C while the data is prepared: the preparation finishes into the cache, no update runs
    and no checkpoint is written, and the rerun trains from the start on the cached data."""
    import rpr_nmt.train.training_data as training_data

    real, stop = training_data.prepare_data, StopAfter(10**9)

    def interrupted(*args, **kwargs):
        prepared = real(*args, **kwargs)
        stop.steps = 0  # the signal arrives while the data is prepared
        return prepared

    monkeypatch.setattr(training_data, "prepare_data", interrupted)
    config = compose_config(corpus, cache_dir, "train.max_steps=2", *QUIET)
    trainer = stop.trainer = Trainer(config, tmp_path / "run", stop=stop)
    summary = trainer.run()
    assert summary["stopped_by"] == "signal"
    assert summary["steps"] == 0 and summary["session_steps"] == 0
    assert not (tmp_path / "run" / "checkpoints").exists() or not any(
        (tmp_path / "run" / "checkpoints").iterdir()
    )
    monkeypatch.setattr(training_data, "prepare_data", real)
    again = Trainer(config, tmp_path / "run").run()
    assert again["steps"] == 2 and again["session_steps"] == 2


def test_a_finished_run_rerun_keeps_its_evaluation_until_decoding_changes(
    corpus, cache_dir, tmp_path, monkeypatch
):
    import rpr_nmt.train.validation as validation_module

    real, calls = validation_module.evaluate_at_end, []

    def counted(*args, **kwargs):
        calls.append(args[2].decode.beam_size)  # the job config's decoding
        return real(*args, **kwargs)

    monkeypatch.setattr(validation_module, "evaluate_at_end", counted)
    common = ("train.max_steps=2", "train.valid_bleu=false", "decode.max_sentences=8")
    first = train(compose_config(corpus, cache_dir, *common), tmp_path / "run")
    written = (tmp_path / "run" / "train_summary.json").read_bytes()
    again = train(compose_config(corpus, cache_dir, *common), tmp_path / "run")
    assert calls == [first["evaluated_setup"]["decode"]["beam_size"]]  # decoded once
    # Nothing trained, nothing decoded: the summary keeps the training session's figures.
    assert again == first and again["session_steps"] == 2
    assert (tmp_path / "run" / "train_summary.json").read_bytes() == written
    # Other decoding settings, or eval files gone: evaluated again.
    train(compose_config(corpus, cache_dir, *common, "decode.beam_size=1"), tmp_path / "run")
    assert calls[-1] == 1 and len(calls) == 2
    for path in (tmp_path / "run").glob("eval_*.json"):
        path.unlink()
    train(compose_config(corpus, cache_dir, *common, "decode.beam_size=1"), tmp_path / "run")
    assert len(calls) == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.precision=fp16"], "fp16 needs a CUDA device"),
        (["train.precision=bf17"], "train.precision='bf17' is not a precision"),
        (["decode.precision=fp16"], "decode.precision must be one of"),
        (["decode.max_sentences=0"], "decode.max_sentences must be >= 1"),
        (["decode.beam_size=0"], "decode.beam_size must be >= 1"),
        (["decode.nbest=5"], r"decode.nbest must be in 1 .. decode.beam_size \(4\)"),
        (["train.valid_bleu_sentences=0"], "train.valid_bleu_sentences=0 must be at least 1"),
        (["train.valid_bleu_sentences=-1"], "train.valid_bleu_sentences=-1 must be at least 1"),
        (["train.max_time_minutes=0"], "train.max_time_minutes=0.0 must be above 0"),
        (["train.max_time_minutes=-5"], "train.max_time_minutes=-5.0 must be above 0"),
        (["data.max_tokens_per_sentence=20000"], "lower it to at most 399 or raise train.max"),
        (["train.best_metric=bleu", "train.valid_bleu=false"], "best_metric=bleu needs"),
        (["train.best_metric=accuracy"], "use loss or bleu"),
        (["train.compile_scope=graph"], "train.compile_scope='graph': use layers or model"),
        (["train.update_freq=0"], "update_freq=0"),
        (["train.label_smoothing=1.0"], r"train.label_smoothing=1.0 must be in \[0, 1\)"),
        (["train.lr=0"], "train.lr=0.0 must be above 0"),
        (["train.keep_last=-1", "train.max_steps=1"], "train.keep_last=-1 must be at least 0"),
        (
            ["train.average_last=-3", "train.max_steps=1"],
            r"train.average_last=-3 must be at least 0 \(0 = off\)",
        ),
        (
            ["train.max_bad_steps=0", "train.max_steps=1"],
            "train.max_bad_steps=0 must be at least 1",
        ),
        (["model.max_relative_position=-1"], "model.max_relative_position=-1"),
        (["model.n_heads=3"], "not divisible by model.n_heads=3"),
        (["model.n_decoder_layers=0"], "model.n_decoder_layers=0"),
        (["model.attention_dropout=1.0"], r"model.attention_dropout=1.0 must be in \[0, 1\)"),
        (["model.activation_dropout=-0.1"], r"model.activation_dropout=-0.1 must be in \[0, 1\)"),
    ],
)
def test_impossible_settings_fail_before_training(corpus, cache_dir, tmp_path, overrides, message):
    with pytest.raises(SettingsError, match=message):
        train(compose_config(corpus, cache_dir, *overrides), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


NATIVE = Bf16Support(True, "CPU with AVX512-BF16")
EMULATED = Bf16Support(False, "AVX2 CPU without native bf16", slowdown=130.0)


def test_auto_precision_is_resolved_recorded_and_kept_on_resume(
    corpus, cache_dir, tmp_path, monkeypatch, caplog
):
    run = tmp_path / "run"
    short = ("train.precision=auto", "decode.precision=auto", "train.valid_bleu=false")
    monkeypatch.setattr(precision, "_cpu_bf16_support", lambda: EMULATED)
    summary = train(compose_config(corpus, cache_dir, *short, "train.max_steps=2"), run)
    assert summary["precision"] == "fp32"
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert (state.config.train.precision, state.config.decode.precision) == ("fp32", "fp32")
    evaluated = json.loads((run / "eval_test.json").read_text())
    assert evaluated["decode"]["precision"] == "fp32"

    # Resumed on a host with native bf16, the run keeps the precision it trained in.
    monkeypatch.setattr(precision, "_cpu_bf16_support", lambda: NATIVE)
    summary = train(compose_config(corpus, cache_dir, *short, "train.max_steps=3"), run)
    assert summary["precision"] == "fp32" and summary["steps"] == 3

    # A run that trained in bf16 resumes in bf16 on a host without it, and says so; the way to
    # fp32 it names depends on its arithmetic (fp32 computes arithmetic 1).
    caplog.set_level("WARNING")
    for arithmetic, way in (
        ("1", "pass train.precision=fp32 to continue in fp32"),
        ("null", "trained in arithmetic 2, which fp32 does not compute"),
    ):
        monkeypatch.setattr(precision, "_cpu_bf16_support", lambda: NATIVE)
        other, chosen = tmp_path / f"bf16_{arithmetic}", f"train.arithmetic={arithmetic}"
        summary = train(
            compose_config(corpus, cache_dir, *short, chosen, "train.max_steps=2"), other
        )
        assert summary["precision"] == "bf16"
        monkeypatch.setattr(precision, "_cpu_bf16_support", lambda: EMULATED)
        caplog.clear()
        summary = train(
            compose_config(corpus, cache_dir, *short, chosen, "train.max_steps=3"), other
        )
        assert summary["precision"] == "bf16"
        warned = [r.getMessage() for r in caplog.records if "continues in bf16" in r.getMessage()]
        assert len(warned) == 1 and way in warned[0]
    # An explicit setting is used as given (in arithmetic 1, which fp32 computes).
    summary = train(
        compose_config(corpus, cache_dir, *short[1:], "train.precision=fp32", "train.arithmetic=1",
                       "train.max_steps=4"),
        tmp_path / "bf16_1",
    )  # fmt: skip
    assert summary["precision"] == "fp32"


@pytest.mark.parametrize(
    "budget",
    [
        ("train.max_steps=6", "train.save_every=3", "train.valid_every=4"),
        ("train.max_steps=5", "train.save_every=5", "train.valid_every=100"),  # the demo's shape
    ],
)
def test_best_pt_holds_the_update_the_summary_names(corpus, cache_dir, tmp_path, budget):
    # The final validation may find a new best at an update that was saved already.
    run = tmp_path / "run"
    extra = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.keep_last=5")
    summary = train(compose_config(corpus, cache_dir, *extra, *budget), run)
    assert summary["best_checkpoint"] == str(run / "checkpoints" / "best.pt")
    assert load_checkpoint(run / "checkpoints" / "best.pt").step == summary["best_step"]


def test_a_weights_only_last_pt_is_refused_with_how_to_resume(corpus, cache_dir, tmp_path):
    from rpr_nmt.checkpoint import CheckpointError, average_checkpoints, save_checkpoint

    run = tmp_path / "run"
    quick = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.save_every=1")
    train(compose_config(corpus, cache_dir, *quick, "train.max_steps=2"), run)
    steps = sorted((run / "checkpoints").glob("step_*.pt"))
    save_checkpoint(average_checkpoints(steps), run / "checkpoints" / "last.pt")
    with pytest.raises(CheckpointError, match="holds weights alone .* copy the newest step_"):
        train(compose_config(corpus, cache_dir, *quick, "train.max_steps=3"), run)


def test_a_failing_validation_saves_the_trained_weights_first(
    corpus, cache_dir, tmp_path, monkeypatch
):
    import rpr_nmt.train.validation as validation_module

    def broken(*args, **kwargs):
        raise RuntimeError("validation broke")

    monkeypatch.setattr(validation_module, "validation_bleu", broken)
    run = tmp_path / "run"
    budget = ("train.max_steps=8", "train.valid_every=3", "train.save_every=100")
    with pytest.raises(RuntimeError, match="validation broke"):
        train(compose_config(corpus, cache_dir, *budget), run)
    assert load_checkpoint(run / "checkpoints" / "last.pt").step == 3


def test_a_rerun_past_the_time_limit_says_the_limit_is_spent(corpus, cache_dir, tmp_path, caplog):
    # A rerun with a larger max_steps trained nothing without a word.
    config = compose_config(corpus, cache_dir, "train.max_steps=2", *QUIET)
    Trainer(config, tmp_path / "run", clock=TickingClock(1.0)).run()
    config = compose_config(
        corpus, cache_dir, "train.max_steps=1000", "train.max_time_minutes=0.01", *QUIET
    )
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        again = Trainer(config, tmp_path / "run", clock=TickingClock(1.0)).run()
    assert again["session_steps"] == 0
    assert "train.max_time_minutes=0.01" in caplog.text and "nothing is trained" in caplog.text


def test_a_stop_between_log_lines_logs_the_updates_since_the_last_one(corpus, cache_dir, tmp_path):
    # Updates after the last log line were never reported: a resumed run's curve lacked them.
    config = compose_config(
        corpus, cache_dir, "train.max_steps=100", "train.log_every=4", "train.valid_every=100",
        "train.save_every=100", *QUIET,
    )  # fmt: skip
    stop = StopAfter(6)
    trainer = stop.trainer = Trainer(config, tmp_path / "run", stop=stop)
    assert trainer.run()["steps"] == 6
    assert [step for step, _ in train_curve(tmp_path / "run")] == [4, 6]


def _applied_lrs(run_dir) -> dict[int, float]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return {r["step"]: r["lr"] for r in rows if r["kind"] == "train"}


@pytest.mark.parametrize("update_freq", [1, 2])
def test_the_cooldown_reaches_zero_at_the_last_update(corpus, cache_dir, tmp_path, update_freq):
    # The last update of a train.max_steps budget ran at 1/(cooldown * max_steps) of the rate.
    flat = ("train.schedule=inverse_sqrt", "train.warmup_steps=1", "train.lr=0.001")
    settings = (*QUIET, *flat, "train.cooldown=0.5", "train.log_every=1", "train.save_every=3")
    run = tmp_path / "run"
    train(compose_config(corpus, cache_dir, *settings, "train.max_steps=6",
                         f"train.update_freq={update_freq}"), run)  # fmt: skip
    train(compose_config(corpus, cache_dir, *settings, "train.max_steps=10",
                         f"train.update_freq={update_freq}"), run)  # fmt: skip
    lrs = _applied_lrs(run)
    factors = [lrs[s] / (0.001 * s**-0.5) for s in range(7, 11)]  # the resumed session's
    assert factors == pytest.approx([0.6, 0.4, 0.2, 0.0])
    assert lrs[3] == pytest.approx(0.001 * 3**-0.5) and lrs[6] == 0.0  # the first session


def test_the_cooldown_under_a_time_limit_reaches_zero_at_the_last_update(
    corpus, cache_dir, tmp_path
):
    settings = ("train.schedule=inverse_sqrt", "train.warmup_steps=1", "train.lr=0.001")
    config = compose_config(
        corpus, cache_dir, *QUIET, *settings, "train.cooldown=0.5", "train.log_every=1",
        "train.max_steps=1000", "train.max_time_minutes=1",
    )  # fmt: skip
    summary = Trainer(config, tmp_path / "run", clock=TickingClock(1.0)).run()
    lrs = _applied_lrs(tmp_path / "run")
    assert summary["stopped_by"] == "time_limit" and max(lrs) == summary["steps"]
    assert lrs[summary["steps"]] == 0.0
    factors = [lrs[s] / (0.001 * s**-0.5) for s in sorted(lrs)]
    assert factors[0] == 1.0 and all(a >= b for a, b in zip(factors, factors[1:], strict=False))


def test_the_time_limit_counts_training_not_data_preparation(
    corpus, cache_dir, tmp_path, monkeypatch, caplog
):
    # Ten minutes of BPE and encoding used up a one-minute limit before the first update.
    import rpr_nmt.train.training_data as training_data

    real, clock = training_data.prepare_data, TickingClock(0.1)

    def slow(*args, **kwargs):
        clock.now += 600.0
        return real(*args, **kwargs)

    monkeypatch.setattr(training_data, "prepare_data", slow)
    config = compose_config(
        corpus, cache_dir, "train.max_steps=3", "train.max_time_minutes=1", *QUIET
    )
    with caplog.at_level(logging.INFO, logger="rpr_nmt.train"):
        summary = Trainer(config, tmp_path / "run", clock=clock).run()
    assert summary["stopped_by"] == "max_steps" and summary["steps"] == 3
    assert summary["wall_seconds"] < 60 and summary["session_wall_seconds"] > 600
    assert any("1.00 min left for training" in r.getMessage() for r in caplog.records)
