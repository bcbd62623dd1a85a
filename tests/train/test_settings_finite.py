"""NaN passes every range check (`nan <= 0` is False), so the float settings are checked for it
before anything else; infinity too where no run could use it."""

from __future__ import annotations

import math

import pytest
import torch

from rpr_nmt.config import DecodeConfig, TrainConfig
from rpr_nmt.train.errors import SettingsError
from rpr_nmt.train.setup import check_settings, decode_settings

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(lr=NAN), "train.lr=nan must be a finite number"),
        (dict(lr=INF), "train.lr=inf must be a finite number"),
        (dict(adam_beta1=NAN), "train.adam_beta1=nan must be a finite number"),
        (dict(adam_beta2=NAN), "train.adam_beta2=nan must be a finite number"),
        (dict(adam_eps=NAN), "train.adam_eps=nan must be a finite number"),
        (dict(weight_decay=INF), "train.weight_decay=inf must be a finite number"),
        (dict(clip_norm=NAN), r"train.clip_norm=nan is not a number: set a number \(0 = off\)"),
        (dict(max_time_minutes=NAN), r"train.max_time_minutes=nan .* \(null = no limit\)"),
        (dict(warmup_steps=4000, cooldown=NAN), r"train.cooldown=nan must be in \[0, 1\]"),
        (dict(label_smoothing=NAN), r"train.label_smoothing=nan must be in \[0, 1\)"),
    ],
)
def test_a_train_setting_that_is_not_a_number_is_refused_in_one_line(fields, message):
    with pytest.raises(SettingsError, match=f"^{message}") as error:
        check_settings(TrainConfig(**fields))
    assert "\n" not in str(error.value)


def test_infinity_that_means_off_still_passes():
    check_settings(TrainConfig(clip_norm=INF, max_time_minutes=INF))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(length_penalty=NAN), r"decode.length_penalty must be a finite number .*, got nan"),
        (dict(max_len_a=NAN), r"decode.max_len_a must be a finite number .*, got nan"),
        (dict(max_len_a=INF), r"decode.max_len_a must be a finite number .*, got inf"),
    ],
)
def test_a_decode_setting_that_is_not_finite_is_refused_before_training(fields, message):
    with pytest.raises(SettingsError, match=f"^{message}$"):
        decode_settings(DecodeConfig(**fields), torch.device("cpu"))
