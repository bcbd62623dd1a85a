"""TrainingState: a round trip through a file, weights_only loading, older and foreign files."""

from __future__ import annotations

import argparse
import errno
import os
import stat
from dataclasses import asdict, replace

import pytest
import torch

from rpr_nmt.checkpoint import (
    BestSoFar,
    CheckpointError,
    Progress,
    TrainingState,
    load_checkpoint,
    save_checkpoint,
)
from rpr_nmt.config import ModelConfig, TrainJobConfig


def small_state(step: int = 7) -> TrainingState:
    config = TrainJobConfig(model=ModelConfig(d_model=8, n_heads=2, max_relative_position=3))
    return TrainingState(
        config=config,
        model={"w": torch.arange(6.0).view(2, 3), "n": torch.tensor([3])},
        bpe_model=b"\x00bpe",
        bpe_sha256="abc",
        step=step,
        optimizer={"state": {}, "param_groups": []},
        data_state={"epoch": 1, "position": 5},
        rng_per_rank=[{"torch": torch.get_rng_state()}],
        best=BestSoFar(valid_loss=2.5, step=4),
        progress=Progress(train_loss=3.0, run_seconds=12.5, train_tokens=100, train_seconds=9.0),
    )


def test_round_trip_keeps_every_field_and_the_config_type(tmp_path):
    state = small_state()
    path = save_checkpoint(state, tmp_path / "a.pt")
    loaded = load_checkpoint(path)
    assert isinstance(loaded.config, TrainJobConfig) and loaded.config == state.config
    assert loaded.best == state.best and loaded.progress == state.progress
    assert (
        loaded.step == 7 and loaded.bpe_model == b"\x00bpe" and loaded.data_state["position"] == 5
    )
    assert torch.equal(loaded.model["w"], state.model["w"])
    assert torch.equal(loaded.rng_per_rank[0]["torch"], state.rng_per_rank[0]["torch"])


def test_the_file_is_plain_data_for_weights_only_loading(tmp_path):
    path = save_checkpoint(small_state(), tmp_path / "a.pt")
    raw = torch.load(path, weights_only=True)
    assert raw["config"]["model"]["max_relative_position"] == 3  # dataclasses.asdict
    assert raw["best"]["valid_loss"] == 2.5 and raw["progress"]["train_tokens"] == 100
    assert torch.equal(raw["rng"]["torch"], raw["rng_per_rank"][0]["torch"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_a_file_in_the_earlier_layout_loads(tmp_path):
    # As written before TrainingState: one "rng" entry, no rng_per_rank, no progress, and a model
    # config that lacks a field added since (it takes the field's default).
    model = {k: v for k, v in asdict(ModelConfig(d_model=8, n_heads=2)).items() if k != "pre_norm"}
    old = {
        "model": {"w": torch.zeros(2)}, "config": {"model": model}, "bpe_model": b"x", "step": 3,
        "rng": {"torch": torch.get_rng_state()}, "best": {"valid_loss": 1.0, "valid_bleu": None},
    }  # fmt: skip
    torch.save(old, tmp_path / "old.pt")
    state = load_checkpoint(tmp_path / "old.pt")
    assert state.step == 3 and state.config.model.d_model == 8 and state.config.model.pre_norm
    assert len(state.rng_per_rank) == 1 and state.best.valid_loss == 1.0
    assert state.progress == Progress() and state.optimizer is None


def test_foreign_and_broken_files_fail_with_one_line_naming_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found: .*missing.pt"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read checkpoint .*junk.pt") as info:
        load_checkpoint(tmp_path / "junk.pt")
    assert "not a checkpoint rpr-nmt wrote" in str(info.value)
    assert "\n" not in str(info.value) and "weights_only" not in str(info.value)
    torch.save({"args": argparse.Namespace(lr=1.0)}, tmp_path / "pickled.pt")  # a foreign object
    with pytest.raises(CheckpointError, match="pickled.pt: not a checkpoint rpr-nmt wrote") as info:
        load_checkpoint(tmp_path / "pickled.pt")
    assert "argparse.Namespace was not an allowed global" in str(info.value)
    assert "\n" not in str(info.value) and "weights_only" not in str(info.value)
    save_checkpoint(small_state(), tmp_path / "whole.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "whole.pt").read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="cannot read checkpoint .*cut.pt") as info:
        load_checkpoint(tmp_path / "cut.pt")
    assert "damaged or truncated" in str(info.value) and "\n" not in str(info.value)
    (tmp_path / "text.pt").write_text("root:x:0:0:root:/root:/bin/bash\n")  # any other file
    with pytest.raises(CheckpointError, match="text.pt: not a checkpoint rpr-nmt wrote"):
        load_checkpoint(tmp_path / "text.pt")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="other.pt is not an rpr-nmt checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    future = small_state().to_dict()
    future["config"]["model"]["rotary"] = True  # a field this version does not know
    torch.save(future, tmp_path / "future.pt")
    with pytest.raises(CheckpointError, match=r"future.pt.*another version.*\['rotary'\]"):
        load_checkpoint(tmp_path / "future.pt")


def test_a_full_disk_names_the_path_and_the_free_space_and_keeps_the_old_file(
    tmp_path, monkeypatch
):
    path = save_checkpoint(small_state(1), tmp_path / "last.pt")

    def full_disk(obj, f):
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("rpr_nmt.checkpoint.state.torch.save", full_disk)
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*last.pt: No space left "
                       r"on device \([\d,]+ MiB free in .*\).*rerun the same command"):  # fmt: skip
        save_checkpoint(small_state(2), path)
    monkeypatch.undo()
    assert load_checkpoint(path).step == 1  # the previous file, intact
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary left


def test_resuming_another_model_or_bpe_is_refused(tmp_path):
    state = small_state()
    other = replace(state.config, model=replace(state.config.model, d_ff=48))
    with pytest.raises(CheckpointError, match=r"differs in \['d_ff'\]"):
        state.check_resumable(other, "abc", tmp_path / "last.pt")
    with pytest.raises(CheckpointError, match="another BPE model"):
        state.check_resumable(state.config, "def", tmp_path / "last.pt")
    state.check_resumable(state.config, "abc", tmp_path / "last.pt")  # the same run: fine


def test_another_bpe_model_says_the_text_or_settings_changed(tmp_path):
    # No setting changed, the training corpus was edited: the message must not blame the settings
    # alone, and must say how to go on.
    with pytest.raises(CheckpointError) as refused:
        small_state().check_resumable(small_state().config, "def", tmp_path / "last.pt")
    message = str(refused.value)
    assert "the training text or a BPE setting" in message and "changed since the run" in message
    assert "restore the original files" in message and "hydra.run.dir=" in message
    assert "\n" not in message


def test_a_checkpoint_gets_the_mode_of_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        save_checkpoint(small_state(), tmp_path / "last.pt")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "last.pt").stat().st_mode) == 0o640
