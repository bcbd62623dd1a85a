"""Position settings that make no sense are refused in one line naming the keys, by the model
(ValueError) and, before any data is prepared, by the trainer's check (SettingsError)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rpr_nmt.config import ModelConfig, position_methods
from rpr_nmt.model import build_model
from rpr_nmt.train.errors import SettingsError
from rpr_nmt.train.setup import check_model_settings

TINY = dict(d_model=16, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
REFUSED = [
    (dict(relative_positions="rope", max_relative_position=16), "model.max_relative_position=16 "
     "is Shaw's k, but model.relative_positions=rope"),
    (dict(relative_positions="none", max_relative_position=4), "model.relative_positions=none"),
    (dict(absolute_positions="learned", sinusoidal=True), "model.sinusoidal=true adds the "
     "sinusoid, but model.absolute_positions=learned"),
    (dict(absolute_positions="none", sinusoidal=True), "model.absolute_positions=none"),
    (dict(absolute_positions="rope"), "model.absolute_positions='rope': use one of sinusoid"),
    (dict(relative_positions="sinusoid"), "model.relative_positions='sinusoid': use one of shaw"),
    (dict(absolute_positions="learned", max_positions=0), "model.max_positions=0"),
    (dict(relative_positions="rope", max_relative_position=0, rope_dims=3), "model.rope_dims=3"),
    (dict(relative_positions="rope", max_relative_position=0, rope_dims=10), "model.rope_dims=10"),
    (dict(relative_positions="rope", max_relative_position=0, rope_base=1.0),
     "model.rope_base=1.0"),
    (dict(relative_positions="rope", max_relative_position=0, rope_layout="neox"),
     "model.rope_layout='neox'"),
    (dict(relative_positions="t5", max_relative_position=0, t5_num_buckets=2),
     "model.t5_num_buckets=2"),
    (dict(relative_positions="t5", max_relative_position=0, t5_max_distance=16),
     "model.t5_max_distance=16 must exceed half of model.t5_num_buckets=32"),
    (dict(relative_positions="t5", max_relative_position=0, share_relative_across_heads=True),
     "model.share_relative_across_heads=true with model.relative_positions=t5"),
    (dict(relative_positions="alibi", max_relative_position=0, share_relative_across_layers=True),
     "model.share_relative_across_layers=true with model.relative_positions=alibi"),
    (dict(positions_in="middle"), "model.positions_in='middle': use one of both, encoder"),
    (dict(max_relative_position=0, positions_in="encoder"), "model.positions_in=encoder places "
     "no position method"),
    (dict(relative_positions="none", max_relative_position=0, absolute_positions="none",
          positions_in="decoder"), "model.positions_in=decoder places no position method"),
]  # fmt: skip


def refusals(cfg: ModelConfig) -> list[str]:
    """What the trainer's check (SettingsError) and the model itself (ValueError) say of `cfg`;
    both must refuse it."""
    with pytest.raises(SettingsError) as settings_error:
        check_model_settings(cfg)
    with pytest.raises(ValueError) as value_error:
        build_model(cfg, vocab_size=10, pad_id=0)
    return [str(settings_error.value), str(value_error.value)]


@pytest.mark.parametrize("fields,message", REFUSED)
def test_nonsense_is_refused_in_one_line_naming_the_keys(fields, message):
    for text in refusals(ModelConfig(**{**TINY, **fields})):
        assert message in text and "\n" not in text


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_shaw_with_both_terms_off_places_no_position_method(stack):
    # Probe: k = 16 with a^K and a^V both off learns no table, a model with no position method,
    # yet model.positions_in=encoder was accepted, where positions=none is refused.
    # A checkpoint trained so before the check still loads (a new run only is refused).
    terms_off = dict(relative_keys=False, relative_values=False, positions_in=stack)
    _refused_for_a_new_run_only(
        terms_off,
        f"model.positions_in={stack} places no position method (the model has none, "
        "model.relative_keys and model.relative_values being false)",
    )
    for kept in (dict(relative_keys=True), dict(relative_values=True), dict(positions_in="both")):
        cfg = ModelConfig(**{**TINY, **terms_off, **kept})  # one term, or both stacks: fine
        check_model_settings(cfg)
        build_model(cfg, vocab_size=10, pad_id=0)


@pytest.mark.parametrize(
    "fields,methods",
    [
        (dict(), ("none", "shaw")),  # ModelConfig's defaults: k = 16, no sinusoid
        (dict(sinusoidal=True), ("sinusoid", "shaw")),
        (dict(sinusoidal=True, max_relative_position=0), ("sinusoid", "none")),
        (dict(max_relative_position=0), ("none", "none")),
        (dict(relative_keys=False, relative_values=False), ("none", "none")),
        (dict(relative_positions="rope", max_relative_position=0), ("none", "rope")),
        (dict(sinusoidal=True, relative_positions="alibi", max_relative_position=0),
         ("sinusoid", "alibi")),
        (dict(absolute_positions="learned", relative_positions="t5", max_relative_position=0),
         ("learned", "t5")),
    ],
)  # fmt: skip
def test_the_methods_a_config_puts_to_work(fields, methods):
    cfg = ModelConfig(**{**TINY, **fields})
    check_model_settings(cfg)
    assert position_methods(cfg) == methods
    # The plain data of a run folder or checkpoint, with or without the new keys.
    old = {k: v for k, v in fields.items() if k in ("sinusoidal", "max_relative_position")}
    if not set(fields) - set(old):
        assert position_methods(old) == methods


def _refused_for_a_new_run_only(fields: dict, message: str) -> None:
    """The trainer's check refuses `fields` in one line containing `message`; a checkpoint trained
    with them before the check still builds its model."""
    cfg = ModelConfig(**{**TINY, **fields})
    with pytest.raises(SettingsError) as error:
        check_model_settings(cfg)
    assert message in str(error.value) and "\n" not in str(error.value)
    build_model(cfg, vocab_size=10, pad_id=0)


def test_a_rope_base_that_is_not_finite_is_refused():
    rope = dict(relative_positions="rope", max_relative_position=0)
    # NaN passed `rope_base <= 1`; no model computes anything but NaN with it, so none builds.
    nan = ModelConfig(**{**TINY, **rope, "rope_base": float("nan")})
    with pytest.raises(SettingsError, match=r"^model\.rope_base=nan must be a finite number"):
        check_model_settings(nan)
    with pytest.raises(ValueError, match=r"^model\.rope_base=nan must be a finite number"):
        build_model(nan, vocab_size=10, pad_id=0)
    # inf builds a model (theta_i = 0 but for the first pair), which no new run should train.
    _refused_for_a_new_run_only(
        {**rope, "rope_base": float("inf")}, "model.rope_base=inf must be a finite number above 1"
    )


def test_a_t5_max_distance_past_int32_is_refused_with_its_range():
    t5 = dict(relative_positions="t5", max_relative_position=0)
    _refused_for_a_new_run_only(
        {**t5, "t5_max_distance": 10**12},
        "model.t5_max_distance=1000000000000: use at most 2147483647 (int32",
    )
    check_model_settings(ModelConfig(**{**TINY, **t5, "t5_max_distance": 2**31 - 1}))


def test_an_absurd_learned_table_is_refused_before_any_allocation():
    fields = dict(absolute_positions="learned", max_relative_position=0, max_positions=100_000_000)
    cfg = ModelConfig(**{**TINY, **fields})
    with pytest.raises(SettingsError) as error:  # a model would be 100M x 16 floats: not built
        check_model_settings(cfg)
    text = str(error.value)
    assert (
        text.startswith("model.max_positions=100000000: use at most 65536 rows")
        and "\n" not in text
    )
    check_model_settings(ModelConfig(**{**TINY, **fields, "max_positions": 65536}))
    # Without a learned table the key is not read: nothing to refuse.
    check_model_settings(ModelConfig(**{**TINY, "max_positions": 100_000_000}))


def test_an_odd_d_head_is_named_when_rope_dims_was_left_unset():
    cfg = ModelConfig(
        d_model=30, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
        relative_positions="rope", max_relative_position=0,
    )  # fmt: skip
    for text in refusals(cfg):
        assert text == (
            "d_head = model.d_model / model.n_heads = 15 is odd, and RoPE rotates pairs of "
            "features: choose model.d_model and model.n_heads with an even quotient, or set "
            "model.rope_dims to an even number in 2..14"
        )
    check_model_settings(replace(cfg, rope_dims=14))  # the second way out works


@pytest.mark.parametrize("method", ["rope", "alibi"])
def test_sharing_tables_across_heads_is_refused_where_there_are_none(method):
    _refused_for_a_new_run_only(
        dict(relative_positions=method, max_relative_position=0, share_relative_across_heads=True),
        f"model.share_relative_across_heads=true with model.relative_positions={method}, which "
        "has no per-head tables to share: set it to false",
    )
    # Shaw's toggles beside no relative method select nothing, as they always did (the big
    # model's sinusoid-only baseline shares its absent tables).
    check_model_settings(
        ModelConfig(**{**TINY, "sinusoidal": True, "max_relative_position": 0,
                       "share_relative_across_heads": True})
    )  # fmt: skip


def test_a_method_named_in_setting_but_not_in_terms_is_refused_not_built_without_it(monkeypatch):
    """docs/architecture.md's step 2 done, step 3 forgotten: the model had no position term."""
    from rpr_nmt.model.positions import setting

    monkeypatch.setattr(setting, "RELATIVE_METHODS", (*setting.RELATIVE_METHODS, "newmethod"))
    config = ModelConfig(d_model=8, n_heads=2, max_relative_position=0,
                         relative_positions="newmethod")  # fmt: skip
    with pytest.raises(ValueError, match="RelativeTerms serves .*not 'newmethod'"):
        build_model(config, vocab_size=11, pad_id=0)
