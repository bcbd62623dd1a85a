"""scripts/bench_export.py: agreement share, table, thread layout, one-line errors, and one tiny
end-to-end run (its timings are not checked)."""

from __future__ import annotations

import sys

import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.config import DataConfig, TrainJobConfig
from rpr_nmt.decode import Hypothesis
from rpr_nmt.model import build_model

from ..conftest import load_script
from .conftest import tiny_config

bench = load_script("bench_export")


def nbest(*tokens: int) -> list[Hypothesis]:
    return [Hypothesis(list(tokens), 0.0)]


def test_identical_share_compares_best_hypotheses_token_for_token():
    ours = [nbest(5, 6), nbest(7), [], nbest(8, 9)]
    theirs = [nbest(5, 6), nbest(7, 7), [], [Hypothesis([8, 9], -3.0), Hypothesis([1], -9.0)]]
    assert bench.identical_share(theirs, ours) == 0.75  # scores and the n-best tail are ignored
    assert bench.identical_share([nbest()], [[]]) == 1.0  # an empty hypothesis = no output
    with pytest.raises(ValueError, match="3 outputs against 2"):
        bench.identical_share([[], [], []], [[], []])


def test_format_table_one_line_per_row():
    rows = [
        bench.Row("rpr-nmt", "fp32", 1, 123.456, 30.123, 55.5, None),
        bench.Row("CTranslate2", "int8", 4, 400.0, 29.5, 55.04, 0.9234),
    ]
    assert bench.format_table(rows).splitlines() == [
        "| engine | weights | beam | sentences/s | BLEU | chrF | identical to rpr-nmt fp32 |",
        "|---|---|---|---|---|---|---|",
        "| rpr-nmt | fp32 | 1 (greedy) | 123.5 | 30.12 | 55.50 | (reference) |",
        "| CTranslate2 | int8 | 4 | 400.0 | 29.50 | 55.04 | 92.3% |",
    ]


def test_thread_layout_streams_share_the_threads():
    assert bench.thread_layout(2, 2) == (2, 1)
    assert bench.thread_layout(2, 1) == (1, 2)
    assert bench.thread_layout(8, 3) == (3, 2)


def test_pieces_to_nbest_gives_our_ids(tiny_bpe):
    ids = tiny_bpe.encode("a man rides the red bike.")
    pieces = [[[tiny_bpe.id_to_piece(i) for i in ids]], []]
    out = bench.pieces_to_nbest(pieces, tiny_bpe)
    assert [h.tokens for h in out[0]] == [ids] and out[1] == []


def not_measured():
    raise AssertionError("the matmul ceilings were measured before the setup was checked")


def test_missing_ctranslate2_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
    monkeypatch.setattr(bench, "matmul_ceilings", not_measured)  # told at once, not after them
    assert bench.main(["--checkpoint", str(tmp_path / "none.pt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -e '.[export]'" in err


def test_per_head_tables_are_refused_in_one_line(
    tiny_checkpoint, tiny_bpe, capsys, tmp_path, monkeypatch
):
    pytest.importorskip("ctranslate2")
    monkeypatch.setattr(bench, "matmul_ceilings", not_measured)  # refused before them
    torch.manual_seed(0)
    cfg = tiny_config(share_relative_across_heads=False)
    model = build_model(cfg, vocab_size=tiny_bpe.vocab_size, pad_id=0)
    data = DataConfig(name="tiny", root=str(tiny_checkpoint.parent / "data"), vocab_size=80)
    state = TrainingState(
        config=TrainJobConfig(data=data, model=cfg),
        model=model.state_dict(),
        bpe_model=tiny_bpe.proto,
        step=1,
    )
    path = save_checkpoint(state, tmp_path / "per_head.pt")
    assert (
        bench.main(
            ["--checkpoint", str(path), "--split", "valid", "--threads", "1", "--streams", "1"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.share_relative_across_heads=true" in err


def test_tiny_run_prints_every_row(tiny_checkpoint, capsys, tmp_path):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "table.md"
    argv = ["--checkpoint", str(tiny_checkpoint), "--split", "valid", "--limit", "8"]
    assert bench.main([*argv, "--threads", "2", "--streams", "2", "--out", str(out)]) == 0
    table = out.read_text()
    assert table in capsys.readouterr().out
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")][1:]
    assert [(r[0][2:], r[1], r[2]) for r in rows] == [
        ("rpr-nmt", "fp32", "1 (greedy)"),
        ("CTranslate2", "float32", "1 (greedy)"),
        ("CTranslate2", "int8", "1 (greedy)"),
        ("rpr-nmt", "fp32", "4"),
        ("rpr-nmt", "bf16", "4"),
        ("CTranslate2", "float32", "4"),
        ("CTranslate2", "int8", "4"),
    ]
    assert rows[1][-1] == "100.0% |"  # float32 greedy is exact (docs/deployment.md)
    assert "valid, 8 sentences" in table and "inter_threads=2, intra_threads=1" in table
