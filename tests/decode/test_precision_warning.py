"""decode.precision=bf16 on a CPU without native bf16 is said once per command, not once per
resolution (evaluate resolved it three times, score twice: probe K3), as "an AVX2 CPU"."""

from __future__ import annotations

import importlib
import logging

import torch

from rpr_nmt import precision
from rpr_nmt.config import ModelConfig
from rpr_nmt.decode import decoding_model, decoding_precision
from rpr_nmt.model import build_model
from rpr_nmt.precision import Bf16Support

CPU = torch.device("cpu")
# The module, not the function rpr_nmt.decode re-exports under the same name.
translate_module = importlib.import_module("rpr_nmt.decode.translate")
EMULATED = Bf16Support(False, "AVX2 CPU without native bf16", slowdown=130.0)


def test_bf16_without_native_support_is_warned_about_once(monkeypatch, caplog):
    monkeypatch.setattr(precision, "_cpu_bf16_support", lambda: EMULATED)
    monkeypatch.setattr(translate_module, "_BF16_CHECKED", set())
    model = build_model(ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                                    n_decoder_layers=1), vocab_size=20, pad_id=0)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="rpr_nmt"):
        # As rpr-nmt-evaluate does: its config, the evaluation's record, the model's cast.
        assert decoding_precision("bf16", CPU) == "bf16"
        assert decoding_precision("bf16", CPU) == "bf16"
        decoding_model(model.eval(), "bf16")
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "decode.precision=bf16 on an AVX2 CPU without native bf16: bf16 matmuls run 130x slower"
    )
    assert decoding_precision("fp32", CPU) == "fp32" and decoding_precision("auto", CPU) == "fp32"
