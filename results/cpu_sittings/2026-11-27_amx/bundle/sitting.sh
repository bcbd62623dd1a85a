#!/bin/bash
# issue 53: NumPy masks and cast-once beside the model as it is, with OpenNMT-py before and after.
# Pauses the where_positions sweep (SIGSTOP) and resumes it at the end, whatever happens.
cd /work/main
PIDS="$(pgrep -f LokyProcess | tr '\n' ' ')"
trap 'kill -CONT $PIDS 2>/dev/null; echo "resumed $PIDS $(date -u +%T)"' EXIT
kill -STOP $PIDS
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 PYTHONUNBUFFERED=1
O=runs/sitting53b; mkdir -p $O
peer() { (cd /work/shared/peers/opennmt && REPORT_EVERY=10 bash train_bench.sh rpr 60) > $O/onmt_$1.log 2>&1; grep -i "tok/s\|peak\|wall" $O/onmt_$1.log | tail -4; }
{ date -u +%FT%TZ; lscpu | grep "Model name"; grep -o -E "avx512_bf16|amx_bf16" /proc/cpuinfo | sort -u | tr '\n' ' '; echo; uptime; } > $O/host.txt
echo "== peer 1 $(date -u +%T)"; peer before
echo "== bench $(date -u +%T)"
(cd /work/cast_once && PYTHONPATH=/work/cast_once RPR_NMT_DATA=/work/shared/data RPR_NMT_CACHE=/work/main/data/cache \
  /work/main/.venv/bin/python scripts/bench_train.py --rounds 10 --steps 4 --threads 2 --precisions bf16 \
  --variants relative absolute --beside npmask bundle --no-memory) > $O/bench_beside.md 2>&1; tail -12 $O/bench_beside.md
echo "== peer 2 $(date -u +%T)"; peer after
echo "== end $(date -u +%T)"
