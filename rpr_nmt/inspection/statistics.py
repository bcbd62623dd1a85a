"""What a trained model learned about relative positions: the tables, and where attention goes.

Shape legend: B batch, T sequence length, H heads, Dh head dim, R = 2k + 1 table rows (relative
distance -k..k, row = distance + k), H' = H for per-head tables or 1 for shared ones, L layers,
W the widest distance counted on its own (mass beyond it is put in the end buckets -W, +W).

- table_statistics: per stack, layer and term (w^K, w^V): row norms (H', R) and the cosine
  similarity between rows (H', R, R).
- position_statistics: what the other methods learned, or fix, per stack: T5's bias per head and
  bucket (U, H) and by distance j - i (H, 2M + 1); the learned table's row norms (N,) and the
  cosine similarity of its position vectors (N, N); ALiBi's fixed slopes (H,), for reference.
- attention_mass: per stack and layer, the self-attention weight alpha_ij summed by relative
  distance clip(j - i, W), averaged over the heads' non-padding queries of a dev set: shape
  (L, H, 2W + 1), each (layer, head) row sums to 1. Forward hooks capture each self-attention's
  input; the weights come from the model's own relative_attention (attention_weights), and the
  output rebuilt beside them is checked against the module's, so the numbers are the model's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
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
from rpr_nmt.model.positions import PositionTerms, T5Bias

__all__ = [
    "AlibiSlopes",
    "AttentionMass",
    "InspectError",
    "LearnedTable",
    "PositionStats",
    "T5Table",
    "TableStats",
    "attention_mass",
    "attention_weights",
    "dev_batches",
    "position_statistics",
    "table_statistics",
]

STACKS = ("encoder", "decoder")


class InspectError(Exception):
    """Nothing to inspect (weights not finite, a dev sentence past a learned table), or the
    recomputed attention does not reproduce the model's (the model code changed)."""


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


@dataclass
class T5Table:
    """One T5 bias table: a stack's (shared by its layers) or one layer's.

    Attributes:
        stack, layer: "encoder"/"decoder", and the 0-based layer, None for the stack's shared one.
        weight: (U, H) the learned scalar of every bucket and head.
        distances: j - i, -M..M in the encoder, -M..0 in the causal decoder.
        by_distance: (H, len(distances)) the bias b_h[bucket(j - i)] the model adds there.
        bidirectional, max_distance: the table's bucketing (t5.py).
    """

    stack: str
    layer: int | None
    weight: Tensor
    distances: list[int]
    by_distance: Tensor
    bidirectional: bool
    max_distance: int


@dataclass
class LearnedTable:
    """One stack's learned absolute table P (positions/learned.py).

    Attributes:
        stack: "encoder" or "decoder".
        norms: (N,) the norm of each position vector P[t].
        cosine: (N, N) cosine similarity between position vectors.
    """

    stack: str
    norms: Tensor
    cosine: Tensor


@dataclass
class AlibiSlopes:
    """ALiBi's fixed slopes m_h (positions/alibi.py): nothing learned, drawn for reference.

    Attributes:
        stacks: the stacks that use them (the same slopes in each).
        slopes: (H,) one per head; head h adds -m_h |i - j| to its logits.
    """

    stacks: list[str]
    slopes: list[float]


@dataclass
class PositionStats:
    """What the position methods besides Shaw's learned (T5, learned) or fix (ALiBi)."""

    t5: list[T5Table]
    learned: list[LearnedTable]
    alibi: AlibiSlopes | None


@torch.no_grad()
def position_statistics(model: Transformer) -> PositionStats:
    """T5's bias tables, the learned position tables and ALiBi's slopes of a model.

    T5's bias by distance comes from the module's own bias() (one query at position M, keys at
    0..2M), so the figures show what the model adds; M = 1.25 * t5_max_distance shows the flat
    tail past max_distance.
    """
    t5, learned, alibi_stacks, slopes = [], [], [], []
    for stack in STACKS:
        ours = getattr(model, stack)
        if ours.embed.learned is not None:
            table = ours.embed.learned.table.detach().float()  # (N, D)
            unit = F.normalize(table, dim=-1)  # (N, D)
            learned.append(LearnedTable(stack, table.norm(dim=-1), unit @ unit.T))  # (N, N)
        terms = ours.relative_terms
        if terms is None:
            continue
        if terms.method == "alibi":
            alibi_stacks.append(stack)
            slopes = list(terms.alibi.slopes)
        elif terms.method == "t5":
            for index, table in enumerate(terms.t5):
                layer = None if len(terms.t5) == 1 else index
                t5.append(_t5_table(stack, layer, table))
    alibi = AlibiSlopes(alibi_stacks, slopes) if alibi_stacks else None
    return PositionStats(t5, learned, alibi)


def _t5_table(stack: str, layer: int | None, table: T5Bias) -> T5Table:
    """A T5Bias's weight and its bias at every distance -M..M (-M..0 for the decoder)."""
    M = math.ceil(1.25 * table.max_distance)
    bias = table.bias(1, 2 * M + 1, M, table.weight.device)[:, 0].float().cpu()  # (H, 2M + 1)
    last = 2 * M + 1 if table.bidirectional else M + 1  # a causal query sees no later key
    distances = list(range(-M, M + 1))[:last]
    weight = table.weight.detach().float().cpu()  # (U, H)
    return T5Table(
        stack, layer, weight, distances, bias[:, :last], table.bidirectional, table.max_distance
    )


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
        InspectError: weights that are not finite; a dev sentence longer than a learned position
            table; the recomputed weights do not reproduce a module's output.
    """
    model.eval()
    _check_inspectable(model, tokenizer, sources, targets)
    W = max_distance
    sums: dict[str, Tensor | None] = dict.fromkeys(STACKS)  # stack -> (L, H, 2W + 1) sums
    queries = dict.fromkeys(STACKS, 0)
    query_padding: dict[str, Tensor] = {}  # stack -> (B, T) of the batch being run

    def hook_of(stack: str, layer: int, n_layers: int) -> Callable[..., None]:
        """The forward hook of one self-attention module: adds its mass into sums[stack]."""

        def hook(attn: RelativeMultiheadAttention, args: tuple, kwargs: dict, result: Any) -> None:
            x, mask = args[0], kwargs.get("key_padding_mask")
            alpha, output = attention_weights(attn, x, mask, kwargs.get("terms"))  # (B, H, T, T)
            if not bool(result[0].isfinite().all()):  # NaN never compares equal: not the code
                raise InspectError(
                    f"{stack} layer {layer} self-attention is NaN or inf: nothing to inspect"
                )
            if not torch.allclose(output.float(), result[0].float(), atol=1e-4, rtol=1e-3):
                raise InspectError(
                    f"recomputed {stack} layer {layer} self-attention differs from the "
                    "model's: rpr_nmt/inspection/statistics.py needs updating to the model code"
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
        for _, src, tgt in dev_batches(tokenizer, sources, targets, batch_size):
            query_padding.update(encoder=src.eq(PAD_ID), decoder=tgt.eq(PAD_ID))
            queries["encoder"] += int(src.ne(PAD_ID).sum())
            queries["decoder"] += int(tgt.ne(PAD_ID).sum())
            model(src.to(_device(model)), tgt.to(_device(model)))
    finally:
        for handle in handles:
            handle.remove()
    mass = {s: (sums[s] / max(queries[s], 1)).cpu() for s in STACKS if sums[s] is not None}
    return AttentionMass(W, mass, queries)


def _check_inspectable(
    model: Transformer, tokenizer: Tokenizer, sources: Sequence[str], targets: Sequence[str]
) -> None:
    """Refuse, as one InspectError, weights that are not finite (a diverged checkpoint) and a dev
    sentence longer than a learned position table (naming its line)."""
    for name, tensor in model.named_parameters():
        if not bool(tensor.isfinite().all()):
            raise InspectError(
                f"the checkpoint's weights are not finite (NaN or inf in {name}, a diverged "
                "run?): nothing to inspect; inspect an earlier checkpoint"
            )
    for stack, side, texts in (("encoder", "source", sources), ("decoder", "target", targets)):
        rows = getattr(model, stack).embed.max_positions
        for line, text in enumerate(texts if rows is not None else (), start=1):
            n = len(tokenizer.encode(text)) + 1  # ids + EOS, or BOS + ids
            if n > rows:
                fewer = f"inspect the {line - 1} before it (--sentences), or " if line > 1 else ""
                raise InspectError(
                    f"dev line {line}: a {side} of {n} positions is longer than the learned "
                    f"position table (model.max_positions={rows}): {fewer}another split (--split)"
                )


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


def dev_batches(
    tokenizer: Tokenizer, sources: Sequence[str], targets: Sequence[str], batch_size: int
) -> Iterator[tuple[int, Tensor, Tensor]]:
    """The dev set in batches of batch_size sentences, as the model reads it in training: the
    index of each batch's first sentence, the sources (ids + EOS) and the teacher-forced targets
    ([BOS] + ids), each padded with PAD_ID.

    Shapes: yields (start, src (B, S), tgt (B, T)).
    """
    for start in range(0, len(sources), batch_size):
        batch = slice(start, start + batch_size)
        src = _padded([tokenizer.encode(s) + [EOS_ID] for s in sources[batch]])  # (B, S)
        tgt = _padded([[BOS_ID] + tokenizer.encode(t) for t in targets[batch]])  # (B, T)
        yield start, src, tgt


def _padded(rows: list[list[int]]) -> Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)  # (B, T)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def _device(model: Transformer) -> torch.device:
    return next(model.parameters()).device
