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
