"""The model: relative-position attention inside an encoder-decoder Transformer.

Modules, from the paper's equations outwards:
    attention.py          the paper's equations: relative_position_index, relative_attention
    attention_kernels.py  their speed work: PyTorch's fused kernel, table windows, hidden keys
    multihead.py          RelativeMultiheadAttention: projections, relative tables, cross-attention;
                          RelativePositions: k and which tables (w^K, w^V, shared across heads)
    cache.py              KeyValueCache, DecoderCache: the state of incremental decoding
    layers.py             EncoderLayer, DecoderLayer and their residual sublayers
    stacks.py             Encoder, Decoder: the layer stacks and their positions
    transformer.py        Transformer, build_model
    embeddings.py         token embeddings and the optional sinusoid or learned positions
    positions/            the other position methods, one module each (learned, RoPE, ALiBi, T5),
                          and the seam self-attention calls (terms.py)
    dropout.py            dropout with cheaper CPU masks
    arithmetic.py         the reduced-precision arithmetic it computes with (train.arithmetic)
    device.py             resolve_device: a device name from a config to a torch.device
"""

from rpr_nmt.model.attention import relative_attention, relative_position_index
from rpr_nmt.model.cache import DecoderCache, KeyValueCache
from rpr_nmt.model.device import resolve_device
from rpr_nmt.model.multihead import RelativeMultiheadAttention, RelativePositions
from rpr_nmt.model.stacks import EncoderOutput
from rpr_nmt.model.transformer import Transformer, build_model

__all__ = [
    "DecoderCache",
    "EncoderOutput",
    "KeyValueCache",
    "RelativeMultiheadAttention",
    "RelativePositions",
    "Transformer",
    "build_model",
    "relative_attention",
    "relative_position_index",
    "resolve_device",
]
