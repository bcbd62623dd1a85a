"""index.md names what the model has: Shaw's k and table sharing for Shaw, not for other methods
(probe K7: an ALiBi model's page said 'k = 0, tables shared across heads: False', and its
'within ±k' column repeated 'at 0')."""

from __future__ import annotations

import torch

from rpr_nmt.inspection.index_page import index_page
from rpr_nmt.inspection.statistics import AttentionMass

MASS = AttentionMass(
    max_distance=2,
    mass={"encoder": torch.tensor([[[0.1, 0.2, 0.4, 0.2, 0.1]]])},  # (L=1, H=1, 2W+1)
    queries={"encoder": 10},
)
COMMON = {"step": 5, "sentences": 3, "split": "val", "share_relative_across_layers": False}


def test_an_alibi_page_names_no_tables_and_no_k():
    about = {**COMMON, "relative_positions": "alibi", "max_relative_position": 0,
             "sinusoidal": False, "share_relative_across_heads": False}  # fmt: skip
    page = index_page([], MASS, about, [])
    assert "relative alibi" in page
    assert "k = " not in page and "tables shared" not in page and "within ±k" not in page
    assert "| 1 | 0.400 | 0.200 | 0.80 |" in page  # at 0, at the ends (+-W), mean |j - i|


def test_a_shaw_page_keeps_k_and_its_column():
    about = {**COMMON, "relative_positions": "shaw", "max_relative_position": 1,
             "relative_keys": True, "relative_values": True, "sinusoidal": False,
             "share_relative_across_heads": True}  # fmt: skip
    page = index_page([], MASS, about, [])
    assert "k = 1, tables shared across heads: True, across layers: False" in page
    assert "| layer | at 0 | within ±k |" in page
    assert "| 1 | 0.400 | 0.800 | 0.200 | 0.80 |" in page  # within +-k = 1: 0.2 + 0.4 + 0.2


def test_within_k_is_left_out_when_the_ends_hold_distances_beyond_k():
    # W = 2 <= k = 2: the bins at +-W hold every distance beyond, so "within +-k" would read 1.0.
    about = {**COMMON, "relative_positions": "shaw", "max_relative_position": 2,
             "relative_keys": True, "relative_values": True, "sinusoidal": False,
             "share_relative_across_heads": True}  # fmt: skip
    page = index_page([], MASS, about, [])
    assert "within ±k" not in page and "1.000" not in page
    assert "| 1 | 0.400 | 0.200 | 0.80 |" in page
