"""Position methods besides Shaw's (attention.py) and the sinusoid (embeddings.py).

One module per method, each opening with its paper's equation:
    learned.py   LearnedPositions: a trained table added to the embeddings (absolute)
    rope.py      Rotary, Rotation: RoPE, queries and keys rotated by position (relative)
    alibi.py     ALiBi, alibi_slopes: a fixed linear bias per head (relative)
    t5.py        T5Bias, t5_bucket: a learned scalar per head and log-spaced bucket (relative)
and what they share:
    terms.py     PositionTerms, RelativeTerms: the seam self-attention calls, with the query offset
    setting.py   the methods on each axis and the one-line refusal of settings that make no sense
"""

from rpr_nmt.model.positions.alibi import ALiBi, alibi_slopes
from rpr_nmt.model.positions.learned import LearnedPositions
from rpr_nmt.model.positions.rope import Rotary, Rotation
from rpr_nmt.model.positions.setting import ABSOLUTE_METHODS, RELATIVE_METHODS, position_problem
from rpr_nmt.model.positions.t5 import T5Bias, t5_bucket
from rpr_nmt.model.positions.terms import PositionTerms, RelativeTerms

__all__ = [
    "ABSOLUTE_METHODS",
    "ALiBi",
    "LearnedPositions",
    "PositionTerms",
    "RELATIVE_METHODS",
    "RelativeTerms",
    "Rotary",
    "Rotation",
    "T5Bias",
    "alibi_slopes",
    "position_problem",
    "t5_bucket",
]
