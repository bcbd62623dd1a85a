"""evaluate_split: one hypothesis line per source line (empty for empty output), JSON record."""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rpr_nmt.config import DecodeConfig
from rpr_nmt.evaluate import evaluate_split, score_corpus

PAD, BOS, EOS, V = 0, 2, 3, 8


@dataclass
class _Src:
    length: Tensor  # (A,) source length, EOS included; one per sentence

    def index_select(self, index: Tensor) -> _Src:
        return _Src(self.length.index_select(0, index))


@dataclass
class _Steps:
    length: int

    def index_select(self, index: Tensor, memory_index: Tensor | None = None) -> _Steps:
        return self


class CopyLengthModel(nn.Module):
    """Emits token 4 ("a") source-length - 2 times, then EOS: a one-word source gives no output."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))

    def encode(self, src: Tensor) -> _Src:
        return _Src((src != PAD).sum(1))

    def decode_step(self, tgt: Tensor, enc: _Src, cache: _Steps | None) -> tuple[Tensor, _Steps]:
        t = 0 if cache is None else cache.length
        logits = torch.full((tgt.size(0), 1, V), -10.0)
        length = enc.length.repeat_interleave(tgt.size(0) // enc.length.size(0))  # (R,)
        ends = length - 2 <= t  # (R,)
        logits[ends, 0, EOS] = 0.0
        logits[~ends, 0, 4] = 0.0
        return logits, _Steps(t + 1)


class Letters:
    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def encode(self, text: str) -> list[int]:
        return [4] * len(text.split())

    def decode(self, ids: list[int]) -> str:
        return " ".join("a" for i in ids if i == 4)


def test_evaluate_split_writes_aligned_hypotheses_and_record(tmp_path):
    sources = ["x y z", "x", "x y", "p q r s"]
    refs = ["a a", "", "a", "a a b"]
    decode = DecodeConfig(beam_size=2, length_penalty=0.6, min_len=0, max_sentences=2, device="cpu")
    scores = evaluate_split(
        CopyLengthModel(), Letters(), sources, refs, decode, "de", tmp_path, "test",
        checkpoint=tmp_path / "x.pt",
    )  # fmt: skip
    hyps = (tmp_path / "hyp_test.txt").read_text(encoding="utf-8").split("\n")
    assert hyps == ["a a", "", "a", "a a a", ""]  # 4 lines, each newline-terminated
    assert scores == score_corpus(hyps[:4], refs, "de")
    record = json.loads((tmp_path / "eval_test.json").read_text())
    assert record["bleu"] == scores.bleu and record["sentences"] == 4
    assert record["checkpoint"] == str(tmp_path / "x.pt")
    assert record["decode"]["beam_size"] == 2 and record["decode"]["device"] == "cpu"
    assert record["sentences_per_sec"] > 0
