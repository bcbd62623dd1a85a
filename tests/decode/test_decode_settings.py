"""Decode settings that cannot work are refused before any decoding, naming the setting."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rpr_nmt.config import DecodeConfig
from rpr_nmt.decode import check_decode_config


@pytest.mark.parametrize("name", ["length_penalty", "max_len_a"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_setting_that_is_not_a_finite_number_is_refused(name, value):
    # Probe C9: decode.length_penalty=nan reached beam search and ended in a traceback.
    with pytest.raises(ValueError, match=rf"^decode\.{name} must be a finite number .* got "):
        check_decode_config(replace(DecodeConfig(), **{name: value}))


@pytest.mark.parametrize("a,b", [(0.0, 0), (-1.0, 0), (0.0, -5)])
def test_limits_that_allow_no_output_token_are_refused(a, b):
    # Probe E: decode.max_len_a=0 decode.max_len_b=0 decode.min_len=0 gave an empty line for
    # every input, exit status 0.
    cfg = replace(DecodeConfig(), max_len_a=a, max_len_b=b, min_len=0)
    with pytest.raises(ValueError, match=r"allow no output token"):
        check_decode_config(cfg)
    check_decode_config(replace(cfg, min_len=1))  # one token at least: allowed
    check_decode_config(replace(cfg, max_len_b=1))
