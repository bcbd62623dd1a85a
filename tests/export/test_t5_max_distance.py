"""A T5 model trained before t5_max_distance was bounded (1e12 was accepted) is refused by the
exporter in one line, not by numpy's int32 OverflowError halfway through the spec."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.export import ExportError, check_exportable
from rpr_nmt.model import build_model

from .conftest import tiny_config

T5 = dict(relative_positions="t5", max_relative_position=0, share_relative_across_heads=False)


def test_a_t5_max_distance_past_int32_is_one_line_naming_the_key():
    torch.manual_seed(0)
    cfg = tiny_config(**T5, share_relative_across_layers=True, t5_max_distance=10**12)
    with pytest.raises(ExportError) as error:
        check_exportable(build_model(cfg, vocab_size=80, pad_id=0))
    message = str(error.value)
    assert message.startswith("model.t5_max_distance=1000000000000 cannot be exported")
    assert "int32" in message and "rpr-nmt-translate" in message and "\n" not in message
