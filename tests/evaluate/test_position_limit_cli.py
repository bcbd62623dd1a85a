"""A sentence longer than a learned position table (positions=learned, model.max_positions) stops
rpr-nmt-translate, -evaluate and -score with one line naming its input and line, exit status 2,
no traceback; translate writes the lines before it first (probe C3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.config import DataConfig, ModelConfig, TrainJobConfig
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.model import build_model
from tests.evaluate.tiny import cli, corpus
from tests.word_corpus import WORDS_DE, WORDS_EN

ROWS = 16  # model.max_positions: a sentence of 15 tokens + EOS fits
LEARNED = ModelConfig(
    d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
    absolute_positions="learned", max_positions=ROWS, max_relative_position=0,
    relative_positions="none",
)  # fmt: skip
LONG_EN = " ".join(WORDS_EN) + "."  # 17 words: more than 15 BPE tokens
LONG_DE = " ".join(WORDS_DE) + "."


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory) -> dict[str, Path]:
    """A learned-table checkpoint and its corpus, whose test split's line 3 is too long."""
    root = tmp_path_factory.mktemp("learned")
    data = root / "data"
    data.mkdir()
    src = ["a man.", "the dog.", LONG_EN, "a red bike.", "the child."]
    tgt = ["ein mann.", "der hund.", "ein mann.", "ein rote rad.", "der kind."]
    (data / "test.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (data / "test.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    train_src, train_tgt = corpus(200, seed=5)
    proto = train_bpe(train_src + train_tgt, vocab_size=80, character_coverage=1.0)
    config = TrainJobConfig(
        data=DataConfig(name="tiny", root=str(data), test_split="test", vocab_size=80),
        model=LEARNED,
    )
    torch.manual_seed(0)
    model = build_model(LEARNED, vocab_size=80, pad_id=0)
    state = TrainingState(config=config, model=model.state_dict(), bpe_model=proto, step=1)
    return {"data": data, "checkpoint": save_checkpoint(state, root / "learned.pt")}


def one_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_translate_names_the_long_line_after_writing_the_lines_before(learned_run, tmp_path):
    (tmp_path / "in.en").write_text(f"a man.\nthe dog.\n{LONG_EN}\na child.\n", encoding="utf-8")
    (tmp_path / "out.de").write_text("PREVIOUS\n", encoding="utf-8")
    out = cli(
        "translate", f"checkpoint={learned_run['checkpoint']}", "input=in.en", "output=out.de",
        "decode.beam_size=2", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2
    err = one_line(out.stderr)
    assert (
        err.startswith("rpr-nmt-translate: error: input=in.en line 3: a source of ")
        and f"longer than the learned position table (model.max_positions={ROWS})" in err
    )
    assert "the 2 lines before it are translated; output=out.de is unchanged" in err
    assert (tmp_path / "out.de").read_text(encoding="utf-8") == "PREVIOUS\n"
    assert len((tmp_path / "out.de.partial").read_text(encoding="utf-8").splitlines()) == 2


def test_evaluate_names_the_split_and_line_of_a_long_source(learned_run, tmp_path):
    out = cli(
        "evaluate", f"checkpoint={learned_run['checkpoint']}", "decode.beam_size=1",
        f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2
    assert one_line(out.stderr).startswith(
        "rpr-nmt-evaluate: error: tiny split 'test' line 3: a source of "
    )


def test_score_names_the_file_and_line_of_a_long_source_or_reference(learned_run, tmp_path):
    ckpt = f"checkpoint={learned_run['checkpoint']}"
    out = cli("score", ckpt, f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    assert out.returncode == 2
    assert one_line(out.stderr).startswith("rpr-nmt-score: error: split 'test' line 3: a source")
    (tmp_path / "in.en").write_text("a man.\nthe dog.\n", encoding="utf-8")
    (tmp_path / "in.de").write_text(f"ein mann.\n{LONG_DE}\n", encoding="utf-8")
    out = cli("score", ckpt, "source=in.en", "reference=in.de", "hydra.run.dir=b", cwd=tmp_path)
    assert out.returncode == 2
    assert one_line(out.stderr).startswith(
        "rpr-nmt-score: error: reference=in.de line 2: a reference of "
    )
