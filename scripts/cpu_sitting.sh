#!/usr/bin/env bash
# One sitting on a CPU host (issue 53): OpenNMT-py 3.5.1 (fp32, Shaw k 16) before and after
# rpr-nmt's position methods in fp32 and bf16, with the host header, into one folder, and the
# table docs/performance.md's sittings hold (scripts/sitting_table.py: tok/s, share of the per-round
# matmul ceiling, time / sinusoid, x OpenNMT-py, peak memory).
#
#   bash scripts/cpu_sitting.sh [OUT]        # default runs/cpu_sitting/<UTC date and time>
#
# Needs idle cores: stop any sweep first (host.txt records the load average before and after).
# The peer's scripts live in PEER (default ../shared/peers/opennmt); its virtualenv and data are made
# by its own setup.sh and prepare.sh when missing (minutes, from the package registry).
# Environment: ROUNDS (5), STEPS (4), PEER_STEPS (60), METHODS (relative absolute rope alibi t5
# learned none), PRECISIONS (fp32 bf16), BENCH_ARGS (more scripts/bench_train.py options, e.g.
# "--arithmetic 1 2"). Takes about 20 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/cpu_sitting/$(date -u +%Y-%m-%dT%H%MZ)}
PEER=${PEER:-../shared/peers/opennmt}
PY=${PY:-.venv/bin/python}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-4}
PEER_STEPS=${PEER_STEPS:-60}
METHODS=${METHODS:-relative absolute rope alibi t5 learned none}
PRECISIONS=${PRECISIONS:-fp32 bf16}
BENCH_ARGS=${BENCH_ARGS:-}
PEERS=${PEERS:-/tmp/peers}  # where the peer's scripts keep their virtualenv and data

[ -f "$PEER/train_bench.sh" ] || { echo "cpu_sitting: $PEER/train_bench.sh not found; set PEER=<the peer's scripts>" >&2; exit 2; }
[ -x "$PY" ] || { echo "cpu_sitting: $PY not found; run make setup (or set PY)" >&2; exit 2; }
for m in $METHODS; do  # refused here, not after the peer's first run
  case " relative absolute rope alibi t5 learned none " in *" $m "*) ;; *)
    echo "cpu_sitting: METHODS: '$m' is not a method; use some of: relative absolute rope alibi t5 learned none" >&2; exit 2;; esac
done
for p in $PRECISIONS; do
  case "$p" in fp32|bf16) ;; *) echo "cpu_sitting: PRECISIONS: '$p' is not fp32 or bf16" >&2; exit 2;; esac
done
mkdir -p "$OUT"
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 PYTHONUNBUFFERED=1

host() {
  echo "$(date -u '+%F %T UTC') $1; $(uptime | sed 's/.*load/load/')"
}
{
  host "start"
  lscpu | grep "Model name" || true
  echo "flags: $(grep -o -E 'avx512_bf16|amx_bf16|avx512_fp16|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "code: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- rpr_nmt scripts || echo ' (uncommitted changes)')"
} > "$OUT/host.txt"
cat "$OUT/host.txt"

if [ ! -x "$PEERS/venv/bin/onmt_train" ]; then
  echo "== the peer's virtualenv ($(date -u +%T))"; PEERS=$PEERS bash "$PEER/setup.sh" > "$OUT/onmt_setup.log" 2>&1
fi
if [ ! -f "$PEERS/onmt/data/spm/vocab.shared" ]; then
  echo "== the peer's data ($(date -u +%T))"; WORK=$PEERS/onmt PY=$PEERS/venv/bin/python bash "$PEER/prepare.sh" > "$OUT/onmt_prepare.log" 2>&1
fi

peer() {
  echo "== OpenNMT-py, $1 ($(date -u +%T))"
  (cd "$PEER" && WORK=$PEERS/onmt VENV=$PEERS/venv REPORT_EVERY=10 bash train_bench.sh rpr "$PEER_STEPS") > "$OUT/onmt_$1.log" 2>&1
  tail -1 "$OUT/onmt_$1.log"
}
peer before
echo "== rpr-nmt ($(date -u +%T))"
# shellcheck disable=SC2086  # the lists are word lists
"$PY" scripts/bench_train.py --rounds "$ROUNDS" --steps "$STEPS" --threads 2 --precisions $PRECISIONS \
  --variants $METHODS $BENCH_ARGS --json "$OUT/bench.json" > "$OUT/bench.md" 2>&1
peer after
host "end" >> "$OUT/host.txt"
"$PY" scripts/sitting_table.py "$OUT" --out "$OUT/sitting.md"
echo "== written: $OUT ($(date -u +%T))"
