"""The tiny trained model and checkpoint that the export tests use (tests/export/conftest.py):
inspection reads the same model; model_of builds its untrained twin with some fields changed."""

import torch

from rpr_nmt.model import build_model
from tests.export.conftest import tiny_bpe, tiny_checkpoint, tiny_config  # noqa: F401  (fixtures)


def model_of(**overrides):
    """The tiny model's config with `overrides`, freshly initialised (seed 0), in eval mode."""
    torch.manual_seed(0)
    return build_model(tiny_config(**overrides), vocab_size=80, pad_id=0).eval()
