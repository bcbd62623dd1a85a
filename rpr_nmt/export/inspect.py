"""What a trained model learned about relative positions: the tables, and where attention goes.

Shape legend: B batch, T sequence length, H heads, Dh head dim, R = 2k + 1 table rows (relative
distance -k..k, row = distance + k), H' = H for per-head tables or 1 for shared ones, L layers,
W the widest distance counted on its own (mass beyond it is put in the end buckets -W, +W).

- table_statistics: per stack, layer and term (w^K, w^V): row norms (H', R) and the cosine
  similarity between rows (H', R, R).
- attention_mass: per stack and layer, the self-attention weight alpha_ij summed by relative
  distance clip(j - i, W), averaged over the heads' non-padding queries of a dev set: shape
  (L, H, 2W + 1), each (layer, head) row sums to 1. Forward hooks capture each self-attention's
  input; the weights come from the model's own relative_attention (attention_weights), and the
  output rebuilt beside them is checked against the module's, so the numbers are the model's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rpr_nmt.data import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from rpr_nmt.model import (
    RelativeMultiheadAttention,
    Transformer,
    relative_attention,
    relative_position_index,
)
from rpr_nmt.model.positions import PositionTerms

__all__ = [
    "AttentionMass",
    "InspectError",
    "TableStats",
    "attention_mass",
    "attention_weights",
    "table_statistics",
]

STACKS = ("encoder", "decoder")


class InspectError(Exception):
    """The recomputed attention does not reproduce the model's (the model code changed)."""


@dataclass
class TableStats:
    """One relative table (w^K or w^V) of one layer.

    Attributes:
        stack, layer, term: "encoder"/"decoder", 0-based layer, "keys" (w^K) or "values" (w^V).
        norms: (H', R) Euclidean norm of each row; column r is distance r - k.
        cosine: (H', R, R) cosine similarity between rows.
    """

    stack: str
    layer: int
    term: str
    norms: Tensor
    cosine: Tensor

    @property
    def max_relative_position(self) -> int:
        return (self.norms.size(-1) - 1) // 2


def table_statistics(model: Transformer) -> list[TableStats]:
    """Row norms and row cosines of every relative table, stack by stack, layer by layer."""
    stats = []
    for stack in STACKS:
        for layer, module in enumerate(getattr(model, stack).layers):
            attn = module.self_attn
            for term, table in (("keys", attn.rel_keys), ("values", attn.rel_values)):
                if table is None or attn.relative.k == 0:
                    continue
                rows = table.detach().float()
                rows = rows if rows.dim() == 3 else rows.unsqueeze(0)  # (H', R, Dh)
                unit = F.normalize(rows, dim=-1)  # (H', R, Dh)
                cosine = unit @ unit.transpose(-1, -2)  # (H', R, R)
                stats.append(TableStats(stack, layer, term, rows.norm(dim=-1), cosine))
    return stats


def attention_weights(
    attn: RelativeMultiheadAttention,
    x: Tensor,
    key_padding_mask: Tensor | None,
    terms: PositionTerms | None = None,
) -> tuple[Tensor, Tensor]:
    """Self-attention weights alpha of one module, from the model's own relative_attention.

    Eq. 3 with every value replaced by a unit vector (v_j = e_j, of length T) and no a^V term gives
    z_i = sum_j alpha_ij e_j = alpha_i: the function the model runs returns its weights. The
    module's output is rebuilt beside them, from its real values and tables, so that a caller can
    check the projections were split as the module splits them.

    Args:
        attn: a self-attention module in eval mode.
        x: its input (after the pre-norm, if any).
        key_padding_mask: True where a key is padding.
        terms: the stack's other relative method at these positions (RoPE's rotation, ALiBi's or
            T5's bias: rpr_nmt/model/positions/terms.py), as the module received them.

    Returns:
        (alpha, output): the weights, and the module's output.

    Shapes:
        x: (B, T, D); key_padding_mask: (B, T); returns alpha (B, H, T, T), output (B, T, D).
    """
    B, T, D = x.shape
    q, keys = attn.split_heads(attn.q_proj(x)), attn.split_heads(attn.k_proj(x))  # (B, H, T, Dh)
    values = attn.split_heads(attn.v_proj(x))  # (B, H, T, Dh)
    if terms is not None and terms.rotation is not None:  # RoPE: as the module rotates them
        q, keys = terms.rotation(q), terms.rotation(keys)
    dtype = q.dtype
    rel_keys = None if attn.rel_keys is None else attn.rel_keys.to(dtype)
    rel_values = None if attn.rel_values is None else attn.rel_values.to(dtype)
    common = dict(
        max_relative_position=attn.relative.k, causal=attn.causal,
        key_padding_mask=key_padding_mask, bias=None if terms is None else terms.bias,
    )  # fmt: skip
    units = torch.eye(T, dtype=dtype, device=x.device).expand(B, attn.n_heads, T, T)  # v_j = e_j
    alpha = relative_attention(q, keys, units, rel_keys=rel_keys, **common)  # (B, H, T, T)
    z = relative_attention(q, keys, values, rel_keys=rel_keys, rel_values=rel_values, **common)
    output = attn.out_proj(z.transpose(1, 2).reshape(B, T, D).to(x.dtype))  # (B, T, D)
    return alpha.float(), output


@dataclass
class AttentionMass:
    """Self-attention mass by relative distance, averaged over a dev set.

    Attributes:
        max_distance: W; distances are clip(j - i, W), so -W and +W also hold everything beyond.
        mass: stack -> (L, H, 2W + 1), column c is distance c - W; each (layer, head) sums to 1.
        queries: stack -> number of non-padding queries averaged over.
    """

    max_distance: int
    mass: dict[str, Tensor]
    queries: dict[str, int]

    @property
    def distances(self) -> list[int]:
        return list(range(-self.max_distance, self.max_distance + 1))


@torch.inference_mode()
def attention_mass(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    max_distance: int,
    batch_size: int = 32,
) -> AttentionMass:
    """Average self-attention mass by relative distance, encoder on the sources and decoder on
    the teacher-forced targets ([BOS] + target ids).

    Args:
        model: the Transformer (put in eval mode here).
        tokenizer: its BPE model.
        sources, targets: line-aligned raw sentences of a dev set.
        max_distance: W, the widest distance counted on its own.
        batch_size: sentences per forward pass.

    Returns:
        The per-layer, per-head mass (AttentionMass).

    Raises:
        InspectError: the recomputed weights do not reproduce a module's output.
    """
    model.eval()
    W = max_distance
    sums: dict[str, Tensor | None] = dict.fromkeys(STACKS)  # stack -> (L, H, 2W + 1) sums
    queries = dict.fromkeys(STACKS, 0)
    query_padding: dict[str, Tensor] = {}  # stack -> (B, T) of the batch being run

    def hook_of(stack: str, layer: int, n_layers: int) -> Callable[..., None]:
        """The forward hook of one self-attention module: adds its mass into sums[stack]."""

        def hook(attn: RelativeMultiheadAttention, args: tuple, kwargs: dict, result: Any) -> None:
            x, mask = args[0], kwargs.get("key_padding_mask")
            alpha, output = attention_weights(attn, x, mask, kwargs.get("terms"))  # (B, H, T, T)
            if not torch.allclose(output.float(), result[0].float(), atol=1e-4, rtol=1e-3):
                raise InspectError(
                    f"recomputed {stack} layer {layer} self-attention differs from the "
                    "model's: rpr_nmt/export/inspect.py needs updating to the model code"
                )
            by_distance = _mass_by_distance(alpha, ~query_padding[stack], W)  # (H, 2W + 1)
            if sums[stack] is None:
                sums[stack] = by_distance.new_zeros(n_layers, *by_distance.shape)
            sums[stack][layer] += by_distance

        return hook

    handles = []
    for stack in STACKS:
        layers = getattr(model, stack).layers
        for layer, module in enumerate(layers):
            hook = hook_of(stack, layer, len(layers))
            handles.append(module.self_attn.register_forward_hook(hook, with_kwargs=True))
    try:
        for start in range(0, len(sources), batch_size):
            batch = slice(start, start + batch_size)
            src = _padded([tokenizer.encode(s) + [EOS_ID] for s in sources[batch]])  # (B, S)
            tgt = _padded([[BOS_ID] + tokenizer.encode(t) for t in targets[batch]])  # (B, T)
            query_padding.update(encoder=src.eq(PAD_ID), decoder=tgt.eq(PAD_ID))
            queries["encoder"] += int(src.ne(PAD_ID).sum())
            queries["decoder"] += int(tgt.ne(PAD_ID).sum())
            model(src.to(_device(model)), tgt.to(_device(model)))
    finally:
        for handle in handles:
            handle.remove()
    mass = {s: (sums[s] / max(queries[s], 1)).cpu() for s in STACKS if sums[s] is not None}
    return AttentionMass(W, mass, queries)


def _mass_by_distance(alpha: Tensor, valid: Tensor, width: int) -> Tensor:
    """Sum over the valid queries of alpha bucketed by clip(j - i, W), W = width.

    Shapes:
        alpha: (B, H, T, T); valid: (B, T) True = a real query; returns (H, 2W + 1).
    """
    B, H, T, _ = alpha.shape
    bucket = relative_position_index(T, T, width, device=alpha.device).expand(B, H, T, T)
    per_query = alpha.new_zeros(B, H, T, 2 * width + 1).scatter_add(-1, bucket, alpha)
    per_query = per_query * valid[:, None, :, None].to(alpha.device)  # (B, H, T, 2W + 1)
    return per_query.sum(dim=(0, 2)).float()  # (H, 2W + 1)


def _padded(rows: list[list[int]]) -> Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)  # (B, T)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def _device(model: Transformer) -> torch.device:
    return next(model.parameters()).device
