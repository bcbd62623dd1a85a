"""scripts/peer_collect.sh: a finished peer run's small artefacts, one set per scored split, the
latest score of each; an unfinished run is one line and exit 2, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "peer_collect.sh"


def collect(args: list[str], peers: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PEERS": str(peers), "PY": sys.executable, **env}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=environment, capture_output=True, text=True, timeout=60
    )


def finished_run(peers: Path, name: str) -> Path:
    """A peer run as peer_news.sh leaves it: scored on newstest2013 twice, then newstest2014."""
    work = peers / "news_v8000"
    run = work / "runs" / f"{name}_rpr_1000000"
    run.mkdir(parents=True)
    (run / "done").write_text("")
    (work / "runs" / f"{name}_rpr_1000000.summary").write_text('step 50\n{"last_step": 1700}\n')
    lines = [
        {"name": name, "split": "newstest2013", "steps": 1600, "bleu": 1.0, "chrf": 9.0},
        {"name": "other", "split": "newstest2013", "steps": 1700, "bleu": 9.9, "chrf": 9.9},
        {"name": name, "split": "newstest2013", "steps": 1700, "bleu": 2.18, "chrf": 21.56},
        {"name": name, "split": "newstest2014", "steps": 1700, "bleu": 2.5, "chrf": 22.0},
    ]
    (work / "scores.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    for split in ("val", "test_2016_flickr"):
        trans = work / "trans" / f"{name}_rpr_1000000_model_step_1700_{split}_b4"
        trans.mkdir(parents=True)
        (trans / "summary.json").write_text(json.dumps({"split": split}))
        (trans / "hyp.detok").write_text(f"a hypothesis of {split}\n")
    return work


def test_each_scored_split_is_collected_with_its_latest_score(tmp_path):
    finished_run(tmp_path / "peers", "P3")
    done = collect(["P3", str(tmp_path / "into")], tmp_path / "peers", VOCAB="8000")
    assert done.returncode == 0, done.stderr
    into = tmp_path / "into" / "P3"
    assert sorted(p.name for p in into.iterdir()) == [
        "hyp_newstest2013.txt", "hyp_newstest2014.txt", "score_newstest2013.json",
        "score_newstest2014.json", "train_summary.txt", "translate_newstest2013.json",
        "translate_newstest2014.json",
    ]  # fmt: skip
    assert json.loads((into / "score_newstest2013.json").read_text())["bleu"] == 2.18
    assert (into / "hyp_newstest2014.txt").read_text() == "a hypothesis of test_2016_flickr\n"
    assert json.loads((into / "translate_newstest2013.json").read_text()) == {"split": "val"}
    assert (into / "train_summary.txt").read_text().startswith("step 50\n")


def test_an_unfinished_run_or_the_wrong_size_is_one_line(tmp_path):
    work = finished_run(tmp_path / "peers", "P3")
    into = tmp_path / "into"
    wrong_size = collect(["P3", str(into)], tmp_path / "peers")  # VOCAB 16000: not there
    assert wrong_size.returncode == 2 and "is VOCAB=16000 its size?" in wrong_size.stderr
    (work / "runs" / "P3_rpr_1000000" / "done").unlink()
    unfinished = collect(["P3", str(into)], tmp_path / "peers", VOCAB="8000")
    assert unfinished.returncode == 2 and "has not finished" in unfinished.stderr
    assert unfinished.stderr.count("\n") == 1 and not into.exists()
    (work / "runs" / "P3_rpr_1000000" / "done").write_text("")
    (work / "scores.jsonl").unlink()
    unscored = collect(["P3", str(into)], tmp_path / "peers", VOCAB="8000")
    assert unscored.returncode == 2 and "has no line for P3" in unscored.stderr
    assert unscored.stderr.count("\n") == 1 and not into.exists()
    usage = collect([], tmp_path / "peers")
    assert usage.returncode == 2 and "usage: peer_collect.sh NAME" in usage.stderr
