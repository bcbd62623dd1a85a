"""A tiny synthetic parallel corpus and a helper that runs rpr-nmt-train in a subprocess."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import torch

from rpr_nmt.cli.config_store import to_job_config
from rpr_nmt.config import TrainJobConfig
from tests.conftest import compose_command
from tests.forkrun import run_module

REPO = Path(__file__).resolve().parents[2]

_EN = (
    "the a red blue green small big dog cat man woman child ball house car tree runs sees eats "
    "plays with in on under near and old young happy street park water"
).split()
_DE = (
    "der ein rot blau gruen klein gross hund katze mann frau kind ball haus auto baum rennt sieht "
    "isst spielt mit in auf unter nahe und alt jung froh strasse park wasser"
).split()
LEXICON = dict(zip(_EN, _DE))


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread: tiny ops on a shared 2-core machine are far faster without OpenMP
    barriers (a descheduled second thread costs a time slice per op)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _write_split(root: Path, split: str, n: int, rng: random.Random) -> None:
    src, tgt = [], []
    for _ in range(n):
        words = [rng.choice(_EN) for _ in range(rng.randint(3, 9))]
        src.append(" ".join(words))
        tgt.append(" ".join(LEXICON[w] for w in reversed(words)))
    (root / f"{split}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (root / f"{split}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")


def make_corpus(root: Path, n_train: int = 300) -> Path:
    """Write train/valid/test .en/.de files of a word-for-word, reversed 'translation' task."""
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    _write_split(root, "train", n_train, rng)
    _write_split(root, "valid", 16, rng)
    _write_split(root, "test", 16, rng)
    return root


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Root of the tiny corpus (shared by the tests of a session; read-only)."""
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One BPE and encoding cache for the whole session, so the BPE model is trained once."""
    return tmp_path_factory.mktemp("cache")


def tiny_overrides(corpus: Path, cache: Path, run_dir: Path, *extra: str) -> list[str]:
    """Overrides for a seconds-long CPU run of transformer_tiny on the tiny corpus."""
    return [
        "data=local", f"data.root={corpus}", f"data.cache_dir={cache}", "data.vocab_size=200",
        "model=transformer_tiny", "train.device=cpu", "train.max_tokens=400",
        "train.warmup_steps=4",
        "train.schedule=inverse_sqrt", "train.lr=0.003", "train.log_every=1", "train.valid_every=4",
        "train.save_every=4", "train.valid_bleu_sentences=8", "decode.max_sentences=16",
        f"hydra.run.dir={run_dir}", *extra,
    ]  # fmt: skip


def compose_config(corpus: Path, cache: Path, *extra: str) -> TrainJobConfig:
    """The job config of the CLI's tiny overrides plus `extra`, as the trainer receives it."""
    overrides = [o for o in tiny_overrides(corpus, cache, Path("unused")) if "hydra." not in o]
    return to_job_config(compose_command([*overrides, *extra]))


def train_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(update, loss) of every training record in a run folder's metrics.jsonl."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [(r["step"], r["loss"]) for r in rows if r["kind"] == "train"]


def run_train(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m rpr_nmt.cli.train ARGS` single-threaded; returns the completed process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    return run_module("rpr_nmt.cli.train", args, cwd=REPO, env=env, timeout=timeout)
