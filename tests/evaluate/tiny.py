"""The tiny corpus and random tiny checkpoints that the command-line tests decode (the fixture
`tiny_run`), and how they run a command: each in a process of its own, forked from one that
imported torch (tests/forkrun.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.config import DataConfig, ModelConfig, TrainJobConfig
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.model import build_model
from tests.conftest import command_env
from tests.forkrun import run_module
from tests.word_corpus import corpus as word_corpus

SACREBLEU = Path(sys.executable).parent / "sacrebleu"
TINY = ModelConfig(
    d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
    max_relative_position=4, pre_norm=True,
)  # fmt: skip


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    """n random English sentences of 2-8 words and their word-by-word German, fixed by `seed`."""
    return word_corpus(n, seed, min_words=2, max_words=8)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> dict[str, Path]:
    """A data folder (train/test splits) and two checkpoints of a random tiny model."""
    root = tmp_path_factory.mktemp("tiny")
    data = root / "data"
    data.mkdir()
    for split, n in (("train", 200), ("test", 7)):
        src, tgt = corpus(n, seed=len(split))
        (data / f"{split}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
        (data / f"{split}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    train_src, train_tgt = corpus(200, seed=5)
    proto = train_bpe(train_src + train_tgt, vocab_size=80, character_coverage=1.0)
    data_cfg = DataConfig(name="tiny", root=str(data), test_split="test", vocab_size=80)
    config = TrainJobConfig(data=data_cfg, model=TINY)
    paths = {"data": data}
    moved = TrainJobConfig(data=replace(data_cfg, root=str(root / "gone")), model=TINY)
    model = build_model(TINY, vocab_size=80, pad_id=0)
    state = TrainingState(config=moved, model=model.state_dict(), bpe_model=proto, step=1)
    paths["moved"] = save_checkpoint(state, root / "moved.pt")  # its corpus folder is gone
    for name, seed in (("a", 0), ("b", 1)):
        torch.manual_seed(seed)
        model = build_model(TINY, vocab_size=80, pad_id=0)
        state = TrainingState(config=config, model=model.state_dict(), bpe_model=proto, step=seed)
        paths[name] = save_checkpoint(state, root / f"{name}.pt")
    return paths


def cli(module: str, *args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    """`python -m rpr_nmt.cli.MODULE ARGS` in a process of its own (forked: tests/forkrun.py)."""
    return run_module(f"rpr_nmt.cli.{module}", list(args), cwd=cwd, env=command_env(), stdin=stdin)


def translate_process(tiny_run, *args: str, cwd: Path) -> subprocess.Popen:
    """rpr-nmt-translate reading a pipe that stays open until the test closes it."""
    cmd = [sys.executable, "-m", "rpr_nmt.cli.translate", f"checkpoint={tiny_run['a']}", *args]
    pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Ctrl-C as from a terminal: a shell without job control (nohup, `cmd &`) starts its children
    # with SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    return subprocess.Popen(cmd, cwd=cwd, env=command_env(), preexec_fn=_default_sigint, **pipes)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
