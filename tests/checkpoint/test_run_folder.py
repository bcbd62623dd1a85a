"""The checkpoints/ folder: step files, last/best links, pruning, averaging, checkpoint_paths."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rpr_nmt.checkpoint import (
    CheckpointError,
    average_checkpoints,
    checkpoint_paths,
    load_checkpoint,
    save_checkpoint,
    step_checkpoints,
    write_step_checkpoint,
)

from .test_state import small_state


def write_steps(folder, steps, keep_last=10, best=()):
    for step in steps:
        state = replace(small_state(step), model={"w": torch.full((2,), float(step))})
        write_step_checkpoint(state, folder, keep_last=keep_last, is_best=step in best)


def test_last_and_best_links_and_pruning(tmp_path):
    folder = tmp_path / "checkpoints"
    write_steps(folder, [1, 2, 3, 4], keep_last=2, best=(2,))
    assert [p.name for p in step_checkpoints(folder)] == ["step_0000003.pt", "step_0000004.pt"]
    assert load_checkpoint(folder / "last.pt").step == 4
    assert load_checkpoint(folder / "best.pt").step == 2  # survives the pruning of its step file
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]


def test_averaging_is_the_mean_and_drops_the_optimizer(tmp_path):
    folder = tmp_path / "checkpoints"
    write_steps(folder, [2, 4])
    averaged = average_checkpoints(step_checkpoints(folder))
    assert torch.equal(averaged.model["w"], torch.full((2,), 3.0))
    assert averaged.step == 4 and averaged.optimizer is None
    assert averaged.averaged_from == [str(p) for p in step_checkpoints(folder)]


def test_checkpoint_paths_takes_files_and_run_directories(tmp_path):
    run = tmp_path / "run"
    write_steps(run / "checkpoints", [1, 2, 3])
    steps = step_checkpoints(run / "checkpoints")
    assert checkpoint_paths([run]) == steps
    assert checkpoint_paths([run], last=2) == steps[1:]
    # A file named beside a run folder is taken as it is, beside the folder's newest 2.
    assert checkpoint_paths([steps[0], run / "checkpoints"], last=2) == steps
    with pytest.raises(CheckpointError, match="checkpoint not found: .*nowhere"):
        checkpoint_paths([tmp_path / "nowhere"])
    with pytest.raises(CheckpointError, match="only 3 were found"):
        checkpoint_paths([run], last=5)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="neither a checkpoint file nor a run directory"):
        checkpoint_paths([tmp_path / "empty"])


def test_last_takes_the_newest_n_of_each_run_folder(tmp_path):
    # Probe: RUN_A RUN_B --last 2 took 2 of each, then kept the newest 2 of the list: RUN_B's.
    write_steps(tmp_path / "a" / "checkpoints", [1, 2, 3])
    write_steps(tmp_path / "b" / "checkpoints", [4, 5, 6])
    a, b = (step_checkpoints(tmp_path / run / "checkpoints") for run in "ab")
    assert checkpoint_paths([tmp_path / "a", tmp_path / "b"], last=2) == a[1:] + b[1:]
    write_steps(tmp_path / "c" / "checkpoints", [7])
    with pytest.raises(CheckpointError) as short:
        checkpoint_paths([tmp_path / "a", tmp_path / "c"], last=2)
    assert str(short.value) == (
        f"the newest 2 checkpoints of {tmp_path / 'c'} were asked for, but only 1 were found "
        "there: ask for --last 1 or fewer"
    )


def test_last_without_a_run_folder_and_a_file_named_twice_are_refused(tmp_path):
    write_steps(tmp_path / "run" / "checkpoints", [1, 2, 3])
    steps = step_checkpoints(tmp_path / "run" / "checkpoints")
    with pytest.raises(CheckpointError, match=r"^--last 2 takes .* drop --last, or name the run"):
        checkpoint_paths(steps, last=2)  # files alone: --last would choose among them silently
    last = tmp_path / "run" / "checkpoints" / "last.pt"  # a hard link to step 3
    for inputs in ([steps[2], tmp_path / "run"], [last, steps[2]]):
        with pytest.raises(CheckpointError) as twice:
            checkpoint_paths(inputs)
        assert str(twice.value) == (
            f"{steps[2]} is the same checkpoint file as {inputs[0]} (last.pt and best.pt are links "
            "to step files): name each checkpoint once"
        )


def test_average_refuses_checkpoints_of_different_bpe_models(tmp_path, capsys):
    # Issue 31, item 7: the same shapes, but another BPE model: rpr-nmt-average averaged them.
    from rpr_nmt.cli import average

    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    save_checkpoint(replace(small_state(1), model={"w": torch.zeros(2)}), a)
    other = replace(small_state(2), model={"w": torch.ones(2)}, bpe_model=b"another bpe model")
    save_checkpoint(other, b)
    assert load_checkpoint(a).bpe_model != load_checkpoint(b).bpe_model
    assert average.main([str(a), str(b), "-o", str(tmp_path / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{b} and {a} have different BPE models" in err
    assert not (tmp_path / "avg.pt").exists()
