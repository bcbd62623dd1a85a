#!/bin/bash
# issue 53's sitting: idle cores, native-bf16 host. Output in runs/sitting53/
cd /work/main
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 PYTHONUNBUFFERED=1
O=runs/sitting53; mkdir -p $O
peer() { (cd /work/shared/peers/opennmt && REPORT_EVERY=10 bash train_bench.sh rpr 60) > $O/onmt_$1.log 2>&1; grep -i "tok/s\|peak\|wall" $O/onmt_$1.log | tail -4; }
{ date -u +%FT%TZ; lscpu | grep "Model name"; grep -o -E "avx512_bf16|amx_bf16" /proc/cpuinfo | sort -u | tr '\n' ' '; echo; uptime; } > $O/host.txt
echo "== peer 1 $(date -u +%T)"; peer before
echo "== bench $(date -u +%T)"
.venv/bin/python scripts/bench_train.py --rounds 5 --steps 4 --threads 2 --precisions fp32 bf16 \
  --variants relative absolute rope alibi t5 learned none --json $O/bench.json > $O/bench.md 2>&1; tail -18 $O/bench.md
echo "== peer 2 $(date -u +%T)"; peer after
echo "== profile $(date -u +%T)"
.venv/bin/python scripts/profile_train.py --precision bf16 --variants relative absolute rope --steps 4 --threads 2 > $O/profile_bf16.md 2>&1; tail -30 $O/profile_bf16.md
echo "== compile model $(date -u +%T)"
TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s53 .venv/bin/python scripts/bench_train.py --precisions fp32 bf16 --variants relative absolute \
  --rounds 3 --steps 4 --threads 2 --no-memory --compile model > $O/compile_model.md 2>&1; tail -12 $O/compile_model.md
echo "== eager beside $(date -u +%T)"
.venv/bin/python scripts/bench_train.py --precisions fp32 bf16 --variants relative absolute \
  --rounds 3 --steps 4 --threads 2 --no-memory > $O/eager_beside.md 2>&1; tail -8 $O/eager_beside.md
echo "== end $(date -u +%T)"
