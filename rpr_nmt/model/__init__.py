"""The model: relative-position attention (attention.py) inside an encoder-decoder Transformer."""

from rpr_nmt.model.attention import (
    KeyValueCache,
    RelativeMultiheadAttention,
    relative_attention,
    relative_position_index,
)
from rpr_nmt.model.transformer import (
    DecoderCache,
    EncoderOutput,
    Transformer,
    build_model,
)

__all__ = [
    "DecoderCache",
    "EncoderOutput",
    "KeyValueCache",
    "RelativeMultiheadAttention",
    "Transformer",
    "build_model",
    "relative_attention",
    "relative_position_index",
]
