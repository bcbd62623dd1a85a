"""Loading checkpoints for inference: the checks on what is averaged or ensembled together, and
which weights (EMA or raw) a loaded model holds."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from rpr_nmt.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from rpr_nmt.checkpoint.inference import (
    check_distinct,
    check_one_direction,
    load_ensemble_members,
    load_inference_model,
)
from tests.evaluate.tiny import tiny_run  # noqa: F401  (a fixture)


def reversed_copy(path: Path, out: Path) -> Path:
    """The checkpoint at `path` relabelled de->en: the same joint BPE model, the other direction."""
    state = load_checkpoint(path)
    data = replace(state.config.data, src_lang="de", tgt_lang="en")
    return save_checkpoint(replace(state, config=replace(state.config, data=data)), out)


def test_models_of_opposite_directions_are_neither_ensembled_nor_averaged(tiny_run, tmp_path):  # noqa: F811
    # Probe S2: en->de and de->en models share a joint BPE model, the only thing checked before.
    a, b = tiny_run["a"], tiny_run["b"]
    deen = reversed_copy(b, tmp_path / "deen.pt")
    with pytest.raises(CheckpointError) as error:
        load_ensemble_members([[a], [deen]])
    assert str(error.value) == (
        f"ensemble members {a} (en-de) and {deen} (de-en) translate different language pairs: "
        "ensemble only models of one direction"
    )
    for paths in ([a, deen], [deen, a]):
        with pytest.raises(CheckpointError, match="translate different language pairs"):
            load_inference_model(paths)
        with pytest.raises(CheckpointError, match=r"\((en-de|de-en)\) with .* \((de-en|en-de)\)"):
            check_one_direction(paths, "average")
    check_one_direction([a, b], "average")  # one direction: accepted
    assert len(load_ensemble_members([[a], [b]])) == 2


def test_a_member_named_twice_is_refused(tiny_run, tmp_path, monkeypatch):  # noqa: F811
    # Probe K6: [A,A] decoded as A alone, recorded as an ensemble of two.
    a = tiny_run["a"]
    monkeypatch.chdir(a.parent)
    with pytest.raises(CheckpointError) as error:
        load_ensemble_members([[a], [tiny_run["b"]], [a.name]])
    assert str(error.value) == (
        f"ensemble members 1 and 3 are the same checkpoint ({a} and a.pt are one file): name "
        "each model once"
    )
    with pytest.raises(CheckpointError) as error:
        load_ensemble_members([[a], [a]])
    assert str(error.value) == (
        f"ensemble members 1 and 2 are the same checkpoint ({a}): name each model once"
    )


def test_a_member_named_twice_through_a_hard_link_is_refused(tiny_run, tmp_path):  # noqa: F811
    # Probe: a run's last.pt and step_*.pt are hard links to one file; Path.resolve() told them
    # apart, so [last.pt,step_0000300.pt] was accepted and recorded as an ensemble of 2 models.
    step = tmp_path / "step_0000300.pt"
    step.write_bytes(tiny_run["a"].read_bytes())
    last = tmp_path / "last.pt"
    os.link(step, last)
    with pytest.raises(CheckpointError) as error:
        load_ensemble_members([[last], [tiny_run["b"]], [step]])
    assert str(error.value) == (
        f"ensemble members 1 and 3 are the same checkpoint ({last} and {step} are one file): "
        "name each model once"
    )
    with pytest.raises(CheckpointError, match="members 1 and 2 are the same checkpoint"):
        check_distinct([[last, tiny_run["b"]], [step, tiny_run["b"]]])  # averages of one set
    copy = tmp_path / "copy.pt"  # a copy is another file: accepted (equal weights, two models)
    copy.write_bytes(step.read_bytes())
    check_distinct([[last], [copy]])
