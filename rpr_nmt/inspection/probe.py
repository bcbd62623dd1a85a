"""Does a model know where each token is? A linear probe of absolute position, layer by layer.

A relative method gives attention only the distance j - i, yet a model may still recover absolute
positions (from the sentence's edges, or in the decoder from its causal mask); an absolute method
adds them to the embeddings, and the layers may keep or lose them. The probe asks each layer's
states directly:

    state x_t (D,) of token t  ->  its absolute position p_t (0 = the first token)
    p_t ~ w . x_t + b, fitted by ridge regression on the even sentences of a dev set

and scores the fit on the odd sentences: R^2 = 1 - sum (p - p_hat)^2 / sum (p - mean p), and the
mean absolute error in positions. Layer 0 is the stack's embedding output (with its absolute
positions, if any), layer l the output of its l-th layer, before the stack's final norm; the
encoder runs on the sources (ids + EOS), the decoder on the teacher-forced targets ([BOS] + ids).
The baseline is the same probe on the token embeddings alone (no position added): what a token's
identity says of where it sits (sentence-initial words, EOS), which a layer's R^2 is read against.

Shape legend: N tokens, D model dim, L layers of a stack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from rpr_nmt.data import PAD_ID, Tokenizer
from rpr_nmt.inspection.statistics import STACKS, InspectError, dev_batches
from rpr_nmt.model import Transformer

__all__ = ["PositionProbe", "fit_and_score", "position_probe"]

RIDGE = 1e-3  # the ridge penalty, relative to the mean eigenvalue of the states' covariance


@dataclass
class PositionProbe:
    """The probe's scores for one stack.

    Attributes:
        stack: "encoder" or "decoder".
        r2: held-out R^2 of layer 0 (the embedding output) .. L.
        mae: held-out mean absolute error in positions, per layer as r2.
        baseline_r2, baseline_mae: the same probe on the token embeddings alone.
        fitted, held_out: tokens in the even (fitted) and odd (scored) sentences.
    """

    stack: str
    r2: list[float]
    mae: list[float]
    baseline_r2: float
    baseline_mae: float
    fitted: int
    held_out: int


def fit_and_score(
    x_fit: Tensor, y_fit: Tensor, x_test: Tensor, y_test: Tensor, ridge: float = RIDGE
) -> tuple[float, float]:
    """Ridge regression y ~ w . x + b on the fitted tokens, scored on the held-out ones.

    The penalty is ridge times the mean eigenvalue of the centred covariance, so that the fit does
    not depend on the states' scale. Computed in float64.

    Shapes:
        x_fit: (N, D), y_fit: (N,), x_test: (N', D), y_test: (N',). Returns (R^2, mean |error|).
    """
    x_fit, y_fit, x_test, y_test = (t.double() for t in (x_fit, y_fit, x_test, y_test))
    mean_x, mean_y = x_fit.mean(0), y_fit.mean()
    xc = x_fit - mean_x  # (N, D)
    gram = xc.T @ xc  # (D, D)
    penalty = ridge * max(float(gram.trace()) / gram.size(0), 1e-12)
    eye = torch.eye(gram.size(0), dtype=gram.dtype)
    w = torch.linalg.solve(gram + penalty * eye, xc.T @ (y_fit - mean_y))  # (D,)
    predicted = (x_test - mean_x) @ w + mean_y  # (N',)
    error = y_test - predicted
    spread = float(((y_test - y_test.mean()) ** 2).sum())
    r2 = 1.0 - float((error**2).sum()) / spread if spread > 0 else float("nan")
    return r2, float(error.abs().mean())


@torch.inference_mode()
def position_probe(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    batch_size: int = 32,
) -> list[PositionProbe]:
    """The probe of every layer of the encoder (on the sources) and decoder (on the targets).

    Args:
        model: the Transformer (put in eval mode here).
        tokenizer: its BPE model.
        sources, targets: line-aligned raw sentences of a dev set; at least 2 (the even ones
            are fitted, the odd ones scored).
        batch_size: sentences per forward pass.

    Raises:
        InspectError: fewer than 2 sentences.
    """
    if len(sources) < 2:
        raise InspectError(
            "the position probe fits on half the sentences and scores the other half: it needs "
            f"at least 2, got {len(sources)} (raise --sentences)"
        )
    model.eval()
    device = next(model.parameters()).device
    # stack -> [fitted, held-out] -> blocks of states (n, D) per layer, positions (n,), ids (n,)
    states = {s: (Tokens(), Tokens()) for s in STACKS}
    chosen: dict[str, tuple[Tensor, Tensor]] = {}  # stack -> (B, T) masks of the batch being run

    def hook_of(stack: str, layer: int) -> Callable[..., None]:
        """The forward hook that keeps one layer's states of the real tokens, by half."""

        def hook(module: torch.nn.Module, args: tuple, out: Tensor | tuple) -> None:
            x = (out[0] if isinstance(out, tuple) else out).float()  # (B, T, D)
            for part, mask in zip(states[stack], chosen[stack]):
                part.states.setdefault(layer, []).append(x[mask.to(x.device)].cpu())  # (n, D)

        return hook

    handles = []
    for stack in STACKS:
        module = getattr(model, stack)
        handles.append(module.embed.register_forward_hook(hook_of(stack, 0)))
        for layer, block in enumerate(module.layers, start=1):
            handles.append(block.register_forward_hook(hook_of(stack, layer)))
    try:
        for start, src, tgt in dev_batches(tokenizer, sources, targets, batch_size):
            odd = (torch.arange(start, start + src.size(0)) % 2 == 1)[:, None]  # (B, 1)
            for stack, ids in (("encoder", src), ("decoder", tgt)):
                at = torch.arange(ids.size(1)).expand_as(ids)  # (B, T) absolute positions
                chosen[stack] = (ids.ne(PAD_ID) & ~odd, ids.ne(PAD_ID) & odd)
                for part, mask in zip(states[stack], chosen[stack]):
                    part.positions.append(at[mask].double())
                    part.ids.append(ids[mask])
            model(src.to(device), tgt.to(device))
    finally:
        for handle in handles:
            handle.remove()
    return [_score(stack, *states[stack], getattr(model, stack).embed.table) for stack in STACKS]


@dataclass
class Tokens:
    """The real tokens of one half of the sentences, for one stack: each layer's states (blocks
    of (n, D), in batch order), and the tokens' positions and ids (blocks of (n,))."""

    states: dict[int, list[Tensor]] = field(default_factory=dict)
    positions: list[Tensor] = field(default_factory=list)
    ids: list[Tensor] = field(default_factory=list)


def _score(stack: str, fit: Tokens, test: Tokens, embedding: torch.nn.Embedding) -> PositionProbe:
    """Every layer's probe and the token-identity baseline of one stack."""
    y_fit, y_test = torch.cat(fit.positions), torch.cat(test.positions)
    scores = [
        fit_and_score(torch.cat(fit.states[layer]), y_fit, torch.cat(test.states[layer]), y_test)
        for layer in sorted(fit.states)
    ]
    weights = embedding.weight.detach().float().cpu()  # (V, D)
    base_r2, base_mae = fit_and_score(
        weights[torch.cat(fit.ids)], y_fit, weights[torch.cat(test.ids)], y_test
    )
    return PositionProbe(
        stack=stack,
        r2=[r2 for r2, _ in scores],
        mae=[mae for _, mae in scores],
        baseline_r2=base_r2,
        baseline_mae=base_mae,
        fitted=len(y_fit),
        held_out=len(y_test),
    )
