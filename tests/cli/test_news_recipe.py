"""The news corpus's preset trains what the chosen tuning run trained: `data=wmt_news_en_de
train=news_short` composes, key for key, the configuration that run recorded (results/
tune_wmt_news_en_de), its budget and its test scoring aside."""

from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import REPO, compose_command

# The tuning run the preset is (docs/results_news.md).
CHOSEN = REPO / "results" / "tune_wmt_news_en_de" / "data.vocab_size=16000,train.lr=0.004"
# What the preset sets otherwise: the hour's budget in updates, and newstest2014 scored at the end.
BUDGET = {"max_steps", "max_time_minutes", "evaluate_test"}


def composed(overrides: list[str]) -> dict:
    return OmegaConf.to_container(compose_command(overrides), resolve=False)


def test_news_short_is_the_chosen_tuning_run():
    recorded = yaml.safe_load((CHOSEN / ".hydra" / "config.yaml").read_text())
    preset = composed(["data=wmt_news_en_de", "train=news_short"])
    assert set(preset) == set(recorded)
    for section in preset:
        if section != "train":
            assert preset[section] == recorded[section], section
    train = {k: v for k, v in preset["train"].items() if k not in BUDGET}
    assert train == {k: v for k, v in recorded["train"].items() if k not in BUDGET}
    assert recorded["train"]["evaluate_test"] is False and preset["train"]["evaluate_test"] is True
    assert preset["train"]["max_time_minutes"] is None
    assert preset["train"]["max_steps"] >= recorded["train"]["max_steps"]


@pytest.mark.parametrize("data", ["multi30k_en_de", "wmt_news_en_de"])
def test_news_short_changes_cpu_short_in_its_budget_and_peak_rate_alone(data):
    cpu_short = composed([f"data={data}", "train=cpu_short"])["train"]
    news = composed([f"data={data}", "train=news_short"])["train"]
    changed = {k for k in news if news[k] != cpu_short[k]}
    assert changed == {"max_steps", "max_time_minutes", "lr"}
