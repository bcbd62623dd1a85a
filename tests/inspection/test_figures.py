"""The attention-mass figure's title names ±k only for a model that has k (an ALiBi, RoPE or
position-free model's title said '(dotted: ±k = 0)')."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.inspection import figures
from rpr_nmt.inspection.statistics import AttentionMass

MASS = AttentionMass(
    max_distance=2,
    mass={"encoder": torch.tensor([[[0.1, 0.2, 0.4, 0.2, 0.1]]])},  # (L=1, H=1, 2W+1)
    queries={"encoder": 10},
)


def _title(monkeypatch, tmp_path, k: int) -> str:
    titles: list[str] = []

    def keep(fig, path):
        titles.append(fig._suptitle.get_text())
        figures._pyplot().close(fig)
        return path

    monkeypatch.setattr(figures, "_save", keep)
    about = {"sentences": 3, "split": "val", "max_relative_position": k}
    figures._plot_mass("encoder", MASS, about, tmp_path / "mass.png")
    return titles[0]


@pytest.mark.parametrize("k", [0, 1])
def test_the_mass_title_names_k_only_when_the_model_has_it(monkeypatch, tmp_path, k):
    title = _title(monkeypatch, tmp_path, k)
    assert "10 queries of 3 val sentences" in title
    assert ("(dotted: ±k = 1)" in title) == (k == 1) and "k = 0" not in title
