"""rpr-nmt-inspect records the weights it loaded, as rpr-nmt-export and -evaluate do: "ema" only
for a checkpoint that has a weight average (probe: inspect.json said "ema" for a checkpoint
without one, while export and evaluate said "raw" for the same file)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rpr_nmt.checkpoint import load_checkpoint, save_checkpoint
from rpr_nmt.cli.inspect import main as inspect_main
from tests.inspection.conftest import tiny_checkpoint  # noqa: F401  (a fixture)


@pytest.mark.parametrize(
    ("average", "asked", "loaded"),
    [(False, "ema", "raw"), (True, "ema", "ema"), (True, "raw", "raw")],
)
def test_inspect_json_records_the_weights_that_were_loaded(
    tiny_checkpoint,  # noqa: F811
    tmp_path,
    average,
    asked,
    loaded,
):
    checkpoint = tiny_checkpoint
    if average:
        state = load_checkpoint(tiny_checkpoint)
        ema = {k: v.float() for k, v in state.model.items() if v.is_floating_point()}
        checkpoint = save_checkpoint(replace(state, ema=ema), tmp_path / "ema.pt")
    out = tmp_path / "inspect"
    args = [str(checkpoint), "-o", str(out), "--sentences", "2", "--weights", asked]
    assert inspect_main(args) == 0
    assert json.loads((out / "inspect.json").read_text())["weights"] == loaded
