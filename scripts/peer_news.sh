#!/usr/bin/env bash
# OpenNMT-py 3.5.1 on the news corpus (data=wmt_news_en_de) beside rpr-nmt: the pairs rpr-nmt trains
# on (scripts/export_pairs.py), the peer's own joint sentencepiece BPE, transformer_small's size
# (the peer's transformer_base.yaml: 3 + 3 layers, d_model 256, Shaw k = 16), a budget in minutes
# on the cores it is given, then beam 4 and sacrebleu on newstest2013; on newstest2014 only with
# TEST=1, once a recipe is chosen.
#
#   bash scripts/peer_news.sh NAME [onmt_train options ...]
#   bash scripts/peer_news.sh lr1 -learning_rate 1.0 -warmup_steps 400        # one tuning run
#   TEST=1 bash scripts/peer_news.sh lr1 -learning_rate 1.0 -warmup_steps 400
#
# The options are appended to the peer's own (its README), so they override its recipe. A finished
# run (its checkpoint folder holds a loadable checkpoint and a done file) is not trained again: the
# command decodes it. A run stopped before its budget starts over (the peer's runs do not resume
# here); a split this checkpoint was decoded and scored on already is not decoded again. Writes
# $PEERS/news_v$VOCAB/runs/NAME_rpr_1000000{,.log,.summary} and one JSON line per split scored,
# {"name", "split", "steps", "bleu", "chrf", ...}, to $PEERS/news_v$VOCAB/scores.jsonl.
# Environment: MINUTES (60), VOCAB (16000, data=wmt_news_en_de's size), SAVE_EVERY (100 updates),
# TEST (0), PEER (../shared/peers/opennmt), PEERS (/tmp/peers: the peer's virtualenv from its
# setup.sh), RPR_NMT_DATA (where wmt_news_ende is).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: peer_news.sh NAME [onmt_train options ...]" >&2; exit 2; }
NAME=$1
shift
case "$NAME" in *[!A-Za-z0-9_.-]*) echo "peer_news: NAME '$NAME': use letters, digits, _ . -" >&2; exit 2;; esac
MINUTES=${MINUTES:-60}
VOCAB=${VOCAB:-16000}
SAVE_EVERY=${SAVE_EVERY:-100}
TEST=${TEST:-0}
PEER=${PEER:-../shared/peers/opennmt}
PEERS=${PEERS:-/tmp/peers}
PY=${PY:-.venv/bin/python}
WORK=$PEERS/news_v$VOCAB
[ -f "$PEER/train_bench.sh" ] || { echo "peer_news: $PEER/train_bench.sh not found; set PEER=<the peer's scripts>" >&2; exit 2; }
case "$MINUTES" in ''|*[!0-9]*|0) echo "peer_news: MINUTES '$MINUTES': use a whole number of minutes above 0" >&2; exit 2;; esac
case "$VOCAB" in ''|*[!0-9]*) echo "peer_news: VOCAB '$VOCAB': use a vocabulary size, e.g. 16000" >&2; exit 2;; esac
case "$SAVE_EVERY" in ''|*[!0-9]*|0) echo "peer_news: SAVE_EVERY '$SAVE_EVERY': use a number of updates above 0" >&2; exit 2;; esac
if [ ! -x "$PEERS/venv/bin/onmt_train" ]; then
  echo "== the peer's virtualenv ($(date -u +%T))"; PEERS=$PEERS bash "$PEER/setup.sh" > "$PEERS/setup.log" 2>&1
fi

if [ ! -f "$WORK/data/spm/vocab.shared" ]; then
  echo "== the pairs and the peer's BPE ($VOCAB) ($(date -u +%T))"
  "$PY" scripts/export_pairs.py "$WORK/pairs" data=wmt_news_en_de --as valid=val --as test=test_2016_flickr
  for l in en de; do  # the peer's prepare.sh also encodes a test_2017_flickr split
    cp "$WORK/pairs/test_2016_flickr.$l.gz" "$WORK/pairs/test_2017_flickr.$l.gz"
  done
  SRC_DIR=$WORK/pairs WORK=$WORK PY=$PEERS/venv/bin/python VOCAB=$VOCAB bash "$PEER/prepare.sh" > "$WORK/prepare.log" 2>&1
  if [ "$VOCAB" != 8000 ]; then  # prepare.sh names its model bpe8k whatever its size
    echo "peer_news: the peer's BPE model is $WORK/data/spm/bpe8k.model, trained with $VOCAB pieces"
  fi
fi

STEPS=1000000  # the time budget ends the run
RUN=$WORK/runs/${NAME}_rpr_$STEPS
if [ ! -f "$RUN/done" ]; then
  echo "== OpenNMT-py $NAME, $MINUTES minutes ($(date -u +%T))"
  rm -rf "$RUN"
  (cd "$PEER" && WORK=$WORK VENV=$PEERS/venv TAG=$NAME REPORT_EVERY=50 SAVE_EVERY=$SAVE_EVERY \
    TIMEOUT=$((MINUTES * 60)) EXTRA="-src_vocab_size $VOCAB -tgt_vocab_size $VOCAB -keep_checkpoint 2 $*" \
    bash train_bench.sh rpr "$STEPS")
  if ! ls "$RUN"/model_step_*.pt > /dev/null 2>&1; then
    echo "peer_news: $NAME saved no checkpoint in $MINUTES minutes (one every $SAVE_EVERY updates); give more MINUTES or a smaller SAVE_EVERY" >&2
    exit 1
  fi
  touch "$RUN/done"
fi
CKPT=""
for c in $(ls -t "$RUN"/model_step_*.pt); do  # the newest checkpoint that loads (TIMEOUT may cut a save)
  if TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 "$PEERS/venv/bin/python" -c \
    "import torch, sys; torch.load(sys.argv[1], map_location='cpu', weights_only=False)" "$c" 2>/dev/null; then
    CKPT=$c; break
  fi
done
[ -n "$CKPT" ] || { echo "peer_news: no loadable checkpoint in $RUN" >&2; exit 1; }
STEP=$(basename "$CKPT" .pt)
STEP=${STEP#model_step_}
SPLITS=val
[ "$TEST" = 1 ] && SPLITS="val test_2016_flickr"
for split in $SPLITS; do
  case "$split" in val) SET=newstest2013;; *) SET=newstest2014;; esac  # the sets behind its split names
  SUMMARY=$WORK/trans/$(basename "$RUN")_model_step_${STEP}_${split}_b4/summary.json
  SCORED="{\"name\": \"$NAME\", \"split\": \"$SET\", \"steps\": $STEP,"  # its line's start
  if [ "$SUMMARY" -nt "$CKPT" ] && grep -qF "$SCORED" "$WORK/scores.jsonl" 2> /dev/null; then
    echo "== $split: this checkpoint is decoded and scored already ($SUMMARY)"
    continue
  fi
  echo "== beam 4 on $split ($(date -u +%T)), $CKPT"
  (cd "$PEER" && WORK=$WORK VENV=$PEERS/venv bash translate_bench.sh "$CKPT" "$split" 4 64) > "$WORK/translate.log" 2>&1
  "$PY" - "$NAME" "$SET" "$STEP" "$SUMMARY" "$RUN.summary" "$*" >> "$WORK/scores.jsonl" <<'EOF'
import json, sys
name, test_set, steps, summary, train, options = sys.argv[1:7]
scores = json.load(open(summary))
trained = json.loads(open(train).read().splitlines()[-1])
print(json.dumps({"name": name, "split": test_set, "steps": int(steps), "bleu": round(scores["bleu"], 2),
                  "chrf": round(scores["chrf"], 2), "options": options, "train": trained}))
EOF
  tail -1 "$WORK/scores.jsonl"
done
