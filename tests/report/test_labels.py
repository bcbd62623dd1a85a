"""Settings named as a reader names them, from the position configs the sweeps train."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from rpr_nmt.config import ModelConfig
from rpr_nmt.report.labels import method_label, setting_labels
from rpr_nmt.report.runs import Run
from tests.conftest import REPO


def positions(name: str, **changes) -> dict:
    """The model section of a run trained with positions=<name> (configs/positions/<name>.yaml)."""
    overrides = yaml.safe_load((REPO / "configs" / "positions" / f"{name}.yaml").read_text())
    return {**asdict(ModelConfig()), **overrides, **changes}


@pytest.mark.parametrize(
    "name, label",
    [
        ("absolute", "sinusoid"),
        ("learned", "learned"),
        ("relative", "Shaw k = 16"),
        ("relative_k4", "Shaw k = 4"),
        ("both", "Shaw k = 16 + sinusoid"),
        ("rope", "RoPE"),
        ("alibi", "ALiBi"),
        ("t5", "T5 buckets"),
        ("none", "none"),
    ],
)
def test_each_position_config_is_named_as_a_reader_names_it(name: str, label: str):
    assert method_label(positions(name)) == label


def test_methods_in_one_stack_say_which():
    assert (
        method_label(positions("relative", positions_in="encoder")) == "Shaw k = 16 (encoder only)"
    )
    assert method_label(positions("both", positions_in="decoder")) == (
        "Shaw k = 16 + sinusoid (decoder only)"
    )
    assert method_label(positions("rope", positions_in="both")) == "RoPE"
    earlier = positions("relative")
    del earlier["positions_in"]  # a run from before the field
    assert method_label(earlier) == "Shaw k = 16"


def test_shaws_terms_are_named_only_when_not_both():
    assert method_label(positions("relative", relative_values=False)) == "Shaw k = 16, a^K only"
    assert method_label(positions("relative", relative_keys=False)) == "Shaw k = 16, a^V only"
    both_off = positions("relative", relative_keys=False, relative_values=False)
    assert method_label(both_off) == "none"  # no term learns anything
    assert method_label(positions("relative", max_relative_position=0)) == "none"
    keys_and_sinusoid = positions("both", relative_values=False)
    assert method_label(keys_and_sinusoid) == "Shaw k = 16, a^K only + sinusoid"


def test_combinations_and_published_configs():
    assert method_label(positions("rope", absolute_positions="learned")) == "RoPE + learned"
    alibi_sinusoid = positions("alibi", absolute_positions="sinusoid", sinusoidal=True)
    assert method_label(alibi_sinusoid) == "ALiBi + sinusoid"
    # Run folders from before the position axes hold only the published switches.
    assert method_label({"max_relative_position": 0, "sinusoidal": True}) == "sinusoid"
    assert method_label({"max_relative_position": 64, "relative_keys": True,
                         "relative_values": True}) == "Shaw k = 64"  # fmt: skip


def run(name: str, model: dict, **train) -> Run:
    return Run(Path(name), [], {"model": model, "train": {"seed": 1, "lr": 0.001, **train}}, {})


def test_settings_with_the_same_methods_keep_what_tells_them_apart():
    runs = [
        run("a", positions("relative")),
        run("b", positions("relative"), lr=0.0005),
        run("c", positions("rope")),
        run("d", positions("rope", rope_base=500.0)),
        run("e", positions("absolute")),
    ]
    assert setting_labels(runs) == [
        "Shaw k = 16, train.lr=0.001",
        "Shaw k = 16, train.lr=0.0005",
        "RoPE, model.rope_base=10000.0",
        "RoPE, model.rope_base=500.0",
        "sinusoid",
    ]
    assert setting_labels(runs[2:3] + runs[4:]) == ["RoPE", "sinusoid"]


def test_plot_axes_name_metrics_as_a_reader_does():
    from rpr_nmt.report.plots import metric_name

    assert metric_name("test_bleu") == "test BLEU"
    assert metric_name("valid_chrf") == "valid chrF"
    assert metric_name("train_tokens_per_sec") == "train tokens per sec"
