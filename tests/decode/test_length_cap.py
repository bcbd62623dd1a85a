"""A model with learned positions decodes within its tables: the output is capped at the decoder
table (its last position ends with EOS, as CTranslate2 caps it), min_len included, and a source
longer than the encoder's table is one PositionLimitError; where the cap does not bind, decoding
is what it was."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.decode import beam_search, greedy_search
from rpr_nmt.decode.constraints import PositionLimitError, position_limits
from rpr_nmt.decode.ensemble import Ensemble
from rpr_nmt.model import build_model

PAD, BOS, EOS = 0, 2, 3
SPECIAL = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)
V = 20


def learned_model(max_positions: int, *, seed: int = 0, eos_shift: float = -30.0):
    """A tiny Transformer with learned tables whose EOS logit is shifted by eos_shift: by default
    lowered so that only a length limit ends a hypothesis (the long outputs that ran past the
    table); raised, it ends sentences early."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0,
        attention_dropout=0.0, absolute_positions="learned", max_positions=max_positions,
        max_relative_position=0, relative_positions="none",
    )  # fmt: skip
    model = build_model(cfg, vocab_size=V, pad_id=PAD).eval()

    def shift_eos(module, args, logits):
        logits[..., EOS] += eos_shift
        return logits

    if eos_shift:
        model.output_projection.register_forward_hook(shift_eos)
    return model


SRC = torch.tensor([[5, 6, 7, 8, 9, EOS], [5, 6, EOS, PAD, PAD, PAD]])  # 6 and 3 positions


@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_output_ends_at_the_last_row_of_the_decoder_table(beam_size):
    # floor(1.2 * 6 + 10) = 17 tokens allowed, but BOS + 7 tokens fill the 8 rows: EOS is forced
    # at the 8th position where decoding past it failed with "an input of 9 positions".
    model = learned_model(8)
    search = greedy_search if beam_size == 1 else beam_search
    extra = {} if beam_size == 1 else dict(beam_size=beam_size, nbest=beam_size)
    nbest = search(model, SRC, length_penalty=0.6, **extra, **SPECIAL)
    for hyps in nbest:
        assert len(hyps) == beam_size
        for hyp in hyps:
            assert len(hyp.tokens) == 7 and EOS not in hyp.tokens
            assert hyp.score > float("-inf")


@pytest.mark.parametrize("beam_size", [1, 3])
def test_min_len_beyond_the_table_yields_to_the_cap(beam_size):
    model = learned_model(8, eos_shift=0.0)
    search = greedy_search if beam_size == 1 else beam_search
    extra = {} if beam_size == 1 else dict(beam_size=beam_size)
    for hyps in search(model, SRC, min_len=300, **extra, **SPECIAL):
        assert [len(h.tokens) for h in hyps] == [7] and hyps[0].score > float("-inf")


def test_an_ensemble_is_capped_at_its_smallest_table():
    members = [learned_model(8, seed=0), learned_model(6, seed=1)]
    assert position_limits(Ensemble(members)) == (6, 6)
    for hyps in beam_search(Ensemble(members), SRC, beam_size=2, **SPECIAL):
        assert len(hyps[0].tokens) == 5


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_source_longer_than_the_encoder_table_is_one_error_naming_it(beam_size):
    model = learned_model(8)
    src = torch.tensor([[5, 6, EOS, PAD, PAD, PAD, PAD, PAD, PAD], [5] * 8 + [EOS]])
    search = greedy_search if beam_size == 1 else beam_search
    with pytest.raises(PositionLimitError) as error:
        search(model, src, **SPECIAL)
    assert str(error.value) == (
        "a source of 9 positions is longer than the learned position table "
        "(model.max_positions=8): shorten or split it, or use a model trained with a larger "
        "model.max_positions"
    )
    assert (error.value.index, error.value.positions, error.value.line) == (1, 9, None)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize(
    ("seed", "eos_shift", "beam_size", "length_penalty"),
    [(3, 1.0, 4, 0.6), (1, 2.0, 4, 1.0), (4, 3.0, 4, 0.6), (3, 1.0, 2, 0.6), (2, 2.0, 1, 0.0)],
)
def test_a_table_that_decoding_never_ran_past_changes_nothing(
    seed, eos_shift, beam_size, length_penalty
):
    """Decode with a 1024-row table, counting the positions fed; a table of just that many rows
    (the same weights) caps the limit of 17 tokens below it, where decoding before the cap
    worked too: the same hypotheses and scores, to the last bit. The bound of early stopping reads
    the uncapped limits, so each step's batch holds the same sentences."""
    big = learned_model(1024, seed=seed, eos_shift=eos_shift)
    steps: list[int] = []
    big.decoder.register_forward_hook(lambda module, args, out: steps.append(1))
    search = greedy_search if beam_size == 1 else beam_search
    extra = {} if beam_size == 1 else dict(beam_size=beam_size, nbest=2)
    run = dict(length_penalty=length_penalty, **extra, **SPECIAL)
    want = search(big, SRC, **run)
    rows = len(steps)  # positions 0 .. rows - 1 were fed
    assert rows - 1 < 17  # floor(1.2 * 6 + 10): the cap binds on the first sentence
    small = learned_model(rows, seed=seed, eos_shift=eos_shift)
    state = big.state_dict()
    for name in ("encoder.embed.learned.table", "decoder.embed.learned.table"):
        state[name] = state[name][:rows].clone()
    small.load_state_dict(state)
    got = search(small, SRC, **run)
    assert [[(h.tokens, h.score) for h in hyps] for hyps in got] == [
        [(h.tokens, h.score) for h in hyps] for hyps in want
    ]


def test_other_position_methods_have_no_limit():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    assert position_limits(build_model(cfg, vocab_size=V, pad_id=PAD)) == (None, None)
    encoder_only = ModelConfig(
        d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
        absolute_positions="learned", max_positions=8, max_relative_position=0,
        relative_positions="none", positions_in="encoder",
    )  # fmt: skip
    assert position_limits(build_model(encoder_only, vocab_size=V, pad_id=PAD)) == (8, None)
