"""rpr-nmt-average in-process on the tiny checkpoints of tests/evaluate/tiny.py."""

from __future__ import annotations

import os

import pytest

from rpr_nmt.checkpoint import load_checkpoint
from rpr_nmt.cli.average import main


def test_an_existing_output_is_replaced_only_with_force(tiny_run, tmp_path, capsys):
    # Probe D4: -o a run's own last.pt replaced it with a weights-only file, without a word.
    out = tmp_path / "last.pt"
    out.write_bytes(tiny_run["a"].read_bytes())
    before = out.read_bytes()
    assert main([str(tiny_run["a"]), str(tiny_run["b"]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"rpr-nmt-average: error: -o {out} exists: choose another file, or pass "
        "--force to replace it\n"
    )
    assert out.read_bytes() == before
    assert main([str(tiny_run["a"]), str(tiny_run["b"]), "-o", str(out), "--force"]) == 0
    assert load_checkpoint(out).averaged_from == [str(tiny_run["a"]), str(tiny_run["b"])]


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_folder_as_output_is_refused(tiny_run, tmp_path, capsys, force):
    assert main([str(tiny_run["a"]), "-o", str(tmp_path), *force]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_checkpoints_of_opposite_directions_are_not_averaged(tiny_run, tmp_path, capsys):
    # Probe S2: an en->de and a de->en model that share a joint BPE model were averaged.
    from tests.checkpoint.test_inference import reversed_copy

    deen = reversed_copy(tiny_run["b"], tmp_path / "deen.pt")
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(deen), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: cannot average {tiny_run['a']} (en-de) with {deen} (de-en): "
        "they translate different language pairs; average only models of one direction\n"
    )
    assert not out.exists()


def test_an_output_under_a_file_or_on_a_read_only_folder_is_one_line(
    tiny_run,
    tmp_path,
    capsys,
    monkeypatch,
):
    # Probe C5/C6: -o under a file, or on a read-only mount, was a traceback after averaging.
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    assert main([str(tiny_run["a"]), "-o", str(afile / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"rpr-nmt-average: error: -o {afile / 'avg.pt'}: {afile} is a file, not a folder: give "
        "another -o\n"
    )

    class ReadOnly:  # chmod does not stop root: the file system's answer is stood in for
        f_flag = os.ST_RDONLY

    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(str(ro)))
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    for out in (ro / "avg.pt", ro / "new" / "avg.pt"):
        assert main([str(tiny_run["a"]), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{ro} is on a read-only file system: give another -o" in err
    assert list(ro.iterdir()) == []


def relabelled(path, out, **model):
    """The checkpoint at `path` with its model config changed: the same weights and BPE model."""
    from dataclasses import replace

    from rpr_nmt.checkpoint import save_checkpoint

    state = load_checkpoint(path)
    config = replace(state.config, model=replace(state.config.model, **model))
    return save_checkpoint(replace(state, config=config), out)


@pytest.mark.parametrize(
    "model, named",
    [
        ({"positions_in": "decoder"}, "model.positions_in: both vs decoder"),
        ({"relative_positions": "rope"}, "model.relative_positions: shaw vs rope"),
    ],
)
def test_models_that_differ_only_in_parameter_free_settings_are_not_averaged(
    tiny_run, tmp_path, capsys, model, named
):
    # Probe F1: RoPE in the encoder only and RoPE in the decoder only (or RoPE and the sinusoid)
    # have the same parameter names and shapes, and were averaged into a model labelled as the
    # first argument's.
    other = relabelled(tiny_run["b"], tmp_path / "other.pt", **model)
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(other), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: {other} holds another model than {tiny_run['a']} ({named}): "
        "cannot average; average checkpoints of one run (an ensemble combines different "
        "models)\n"
    )
    assert not out.exists()


def test_checkpoints_that_differ_only_in_dropout_are_averaged(tiny_run, tmp_path):
    # Dropout acts only in training: the same model, averaged as before.
    other = relabelled(tiny_run["b"], tmp_path / "other.pt", dropout=0.3, attention_dropout=0.0)
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(other), "-o", str(out)]) == 0
    assert load_checkpoint(out).averaged_from == [str(tiny_run["a"]), str(other)]


def small_run(folder, steps, *, seed=1, ema=False):
    """A run folder whose checkpoints/ holds step checkpoints of a 2-weight model (w = step)."""
    from dataclasses import replace

    import torch

    from rpr_nmt.checkpoint import write_step_checkpoint
    from tests.checkpoint.test_state import small_state

    for step in steps:
        state = small_state(step)
        config = replace(state.config, train=replace(state.config.train, seed=seed))
        weights = {"w": torch.full((2,), float(step))}
        state = replace(state, config=config, model=weights, ema=dict(weights) if ema else None)
        write_step_checkpoint(state, folder / "checkpoints", keep_last=10, is_best=False)
    return folder


def test_last_n_takes_n_of_each_run_folder_and_says_they_are_different_runs(tmp_path, capsys):
    # Probe: RUN_A RUN_B --last 2 averaged RUN_B's last 2 alone: RUN_A was dropped without a word.
    a, b = small_run(tmp_path / "a", [1, 2, 3]), small_run(tmp_path / "b", [4, 5, 6], seed=2)
    out = tmp_path / "avg.pt"
    assert main([str(a), str(b), "--last", "2", "-o", str(out)]) == 0
    averaged = load_checkpoint(out)
    assert [p.split("/")[-3:] for p in averaged.averaged_from] == [
        [run, "checkpoints", f"step_{step:07d}.pt"]
        for run, step in [("a", 2), ("a", 3), ("b", 5), ("b", 6)]
    ]
    assert averaged.model["w"].tolist() == [4.0, 4.0]  # (2 + 3 + 5 + 6) / 4
    err = capsys.readouterr().err
    first, other = a / "checkpoints" / "step_0000002.pt", b / "checkpoints" / "step_0000005.pt"
    assert err == (
        f"rpr-nmt-average: warning: {other} and {first} come from different training runs (run "
        f"folders {a.resolve()} vs {b.resolve()}; train.seed 1 vs 2): averaging them anyway, but "
        "models trained apart average into a working model only when they started from one (a "
        "model soup); for the paper's averaging name the checkpoints of one run\n"
    )


def test_checkpoints_of_one_run_are_averaged_without_a_warning(tmp_path, capsys):
    run = small_run(tmp_path / "run", [1, 2, 3])
    assert main([str(run), "--last", "2", "-o", str(tmp_path / "avg.pt")]) == 0
    assert capsys.readouterr().err == ""
    assert load_checkpoint(tmp_path / "avg.pt").model["w"].tolist() == [2.5, 2.5]


def test_files_of_runs_with_different_seeds_are_averaged_with_a_warning(tmp_path, capsys):
    # Files outside a run folder: only their configs tell their runs apart.
    one = small_run(tmp_path / "one", [1]) / "checkpoints" / "step_0000001.pt"
    two = small_run(tmp_path / "two", [1], seed=7) / "checkpoints" / "step_0000001.pt"
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    a.write_bytes(one.read_bytes())
    b.write_bytes(two.read_bytes())
    assert main([str(a), str(b), "-o", str(tmp_path / "avg.pt")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        f"rpr-nmt-average: warning: {b} and {a} come from different training runs (train.seed "
        "1 vs 7): averaging them anyway"
    )


def test_a_mix_of_checkpoints_with_and_without_a_weight_average_is_said(tmp_path, capsys):
    # Probe: the weight averages of the checkpoints that had one were dropped without a word.
    run = small_run(tmp_path / "run", [1, 2], ema=True)
    small_run(run, [3])  # resumed without train.ema_decay
    out = tmp_path / "avg.pt"
    assert main([str(run), "-o", str(out)]) == 0
    step3 = run / "checkpoints" / "step_0000003.pt"
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: warning: {step3} holds no weight average (train.ema_decay) while the "
        "other 2 of the 3 checkpoints do: their weight averages are left out, and the result is "
        "the average of the trained weights alone\n"
    )
    assert load_checkpoint(out).ema is None
    assert main([str(run), "--last", "2", "-o", str(tmp_path / "avg2.pt")]) == 0
    assert "holds no weight average" in capsys.readouterr().err
    assert (
        main(
            [
                str(run / "checkpoints" / "step_0000001.pt"),
                str(run / "checkpoints" / "step_0000002.pt"),
                "-o",
                str(tmp_path / "avg3.pt"),
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == ""  # all with one: averaged, as before
    assert load_checkpoint(tmp_path / "avg3.pt").ema is not None


def test_last_with_files_alone_is_refused_in_one_line(tiny_run, tmp_path, capsys):
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(tiny_run["b"]), "--last", "1", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        "rpr-nmt-average: error: --last 1 takes the newest step checkpoints of each run "
        "directory, but only checkpoint files were named (they are averaged as they are): drop "
        "--last, or name the run directory\n"
    )
    assert not out.exists()


def test_an_output_into_a_training_runs_checkpoints_is_refused(tmp_path, capsys):
    # Probe J1: -o RUN/checkpoints/avg.pt beside a running trainer, which prunes and replaces there.
    from rpr_nmt.checkpoint import run_folder_lock

    run = small_run(tmp_path / "run", [1, 2, 3])
    out = run / "checkpoints" / "averaged.pt"
    with run_folder_lock(run):
        assert main([str(run), "--last", "2", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: -o {out} is in the checkpoints/ folder of a run that is training "
        "(its train.lock is held), where the trainer replaces and prunes files: write the average "
        "elsewhere, or once the run has ended\n"
    )
    assert not out.exists()
    assert main([str(run), "--last", "2", "-o", str(out)]) == 0  # the run has ended


def test_an_output_named_as_a_step_checkpoint_is_refused(tmp_path, capsys):
    # Probe J2: -o RUN/checkpoints/step_0000035.pt became one of the run's steps: its final
    # train.average_last averaged this average again, as if trained.
    run = small_run(tmp_path / "run", [1, 2, 3])
    out = run / "checkpoints" / "step_0000004.pt"
    assert main([str(run), "--last", "2", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: -o {out} is named as a step checkpoint, which the run's pruning "
        "and train.average_last would take for one of its own: name it otherwise (avg.pt, say)\n"
    )
    assert not out.exists()


def test_models_of_other_shapes_are_refused_naming_the_parameter(tmp_path, capsys):
    # Probe J3: another vocabulary's checkpoint was "another model", without saying where.
    from dataclasses import replace

    import torch

    from rpr_nmt.checkpoint import save_checkpoint
    from tests.checkpoint.test_state import small_state

    a = save_checkpoint(replace(small_state(1), model={"w": torch.zeros(2)}), tmp_path / "a.pt")
    b = save_checkpoint(replace(small_state(2), model={"w": torch.zeros(3)}), tmp_path / "b.pt")
    assert main([str(a), str(b), "-o", str(tmp_path / "avg.pt")]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: {b} holds another model than {a} (w: shape [2] vs [3]): cannot "
        "average\n"
    )


def test_an_average_given_beside_its_own_checkpoints_is_said(tmp_path, capsys):
    # Probe J: averaged.pt with the step files it came from counted them twice, without a word.
    run = small_run(tmp_path / "run", [1, 2, 3])
    steps = sorted((run / "checkpoints").glob("step_*.pt"))
    avg = tmp_path / "avg.pt"
    assert main([*map(str, steps[-2:]), "-o", str(avg)]) == 0
    capsys.readouterr()
    assert main([str(avg), str(steps[-1]), "-o", str(tmp_path / "again.pt")]) == 0
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: warning: {avg} is already the mean of 2 checkpoints, {steps[-1]} "
        "among them, which are also given: they count twice; name either the average or its "
        "checkpoints\n"
    )
    assert main([str(avg), str(steps[0]), "-o", str(tmp_path / "fine.pt")]) == 0
    assert capsys.readouterr().err == ""
