"""scripts/count_params.py: the parameter counts of the model presets."""

from __future__ import annotations

import pytest

from ..conftest import load_script

count_params = load_script("count_params")


def test_the_tiny_preset_counts_what_the_built_model_holds(capsys):
    count_params.main([])
    row = next(line for line in capsys.readouterr().out.splitlines() if "transformer_tiny" in line)
    assert row == "| transformer_tiny | 8000 | 301,184 | 256,000 | 2,304 |"


def test_an_unknown_argument_is_refused_before_any_model_is_built(capsys):
    # It used to be ignored: `--help` or a typo built and printed every preset.
    with pytest.raises(SystemExit) as exit:
        count_params.main(["--preset", "transformer_tiny"])
    assert exit.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
