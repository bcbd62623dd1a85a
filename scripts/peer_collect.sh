#!/usr/bin/env bash
# One finished run of scripts/peer_news.sh, its small artefacts copied into a results folder:
#
#   bash scripts/peer_collect.sh NAME [INTO]      # INTO: results/peer_wmt_news_en_de
#   VOCAB=8000 bash scripts/peer_collect.sh P3
#
# Writes INTO/NAME/train_summary.txt (the peer's step log, then its training summary as one JSON
# line) and, for each split the run was scored on (newstest2013, and newstest2014 after TEST=1),
# score_SPLIT.json (its line of scores.jsonl, the latest), translate_SPLIT.json (the decoding
# summary) and hyp_SPLIT.txt (the detokenised hypotheses, which sacrebleu re-scores).
# Environment: VOCAB (16000) and PEERS (/tmp/peers), as for peer_news.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: peer_collect.sh NAME [INTO]" >&2; exit 2; }
NAME=$1
INTO=${2:-results/peer_wmt_news_en_de}
VOCAB=${VOCAB:-16000}
PEERS=${PEERS:-/tmp/peers}
PY=${PY:-.venv/bin/python}
WORK=$PEERS/news_v$VOCAB
RUN=$WORK/runs/${NAME}_rpr_1000000
[ -f "$RUN/done" ] && [ -f "$RUN.summary" ] || {
  echo "peer_collect: $RUN has not finished (no done file or summary); is VOCAB=$VOCAB its size?" >&2
  exit 2
}
"$PY" - "$NAME" "$WORK" "$RUN" "$INTO/$NAME" <<'EOF'
import json, shutil, sys
from pathlib import Path

name, work, run, into = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
latest = {}  # split -> its latest scored line for this run
scores = work / "scores.jsonl"
for line in scores.read_text().splitlines() if scores.exists() else []:
    score = json.loads(line)
    if score["name"] == name:
        latest[score["split"]] = score
if not latest:
    print(f"peer_collect: {scores} has no line for {name}: decode the run with peer_news.sh",
          file=sys.stderr)
    sys.exit(2)
into.mkdir(parents=True, exist_ok=True)
shutil.copyfile(run.with_name(run.name + ".summary"), into / "train_summary.txt")
folder = {"newstest2013": "val", "newstest2014": "test_2016_flickr"}  # the peer's split names
for split, score in sorted(latest.items()):
    trans = work / "trans" / f"{run.name}_model_step_{score['steps']}_{folder[split]}_b4"
    (into / f"score_{split}.json").write_text(json.dumps(score) + "\n")
    shutil.copyfile(trans / "summary.json", into / f"translate_{split}.json")
    shutil.copyfile(trans / "hyp.detok", into / f"hyp_{split}.txt")
    print(f"{name} {split}: {score['bleu']} BLEU, chrF {score['chrf']}, {score['steps']} updates -> {into}")
EOF
