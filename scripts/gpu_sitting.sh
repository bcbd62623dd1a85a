#!/usr/bin/env bash
# One sitting on a lent GPU machine (issue 18), in stages that each fit one 10-minute device call.
#
#   bash scripts/gpu_sitting.sh STAGE [STAGE ...]
#   stages: env tests dispatch train speed compiled byquery layers onmt decode sweep
#
# The machine starts bare: the packages it lacks travel as wheels in .whl/ (.whl_onmt/ for the onmt
# stage) and the corpus as a copy in .device/data/multi30k, all git-ignored and named in the call's
# `carry`; `python scripts/gpu_prepare.py` builds them here beforehand. The stages write to SITTING
# (default /tmp/gpu_sitting); as each stage ends, the files it wrote are packed into one file,
# STAGE.tar.gz, in $OUT (the device's return folder; RESULTS=DIR elsewhere), written under a temporary
# name and renamed, so that a call cut at its 10-minute limit still returns every stage it finished
# (and what the stage it cut had written, as STAGE_cut.tar.gz).
# Nothing else goes there: a device call returns at most 8 files, and a sweep writes dozens.
#
#   env     versions, GPU, packages: env.txt
#   tests   pytest -m gpu over TESTS (default tests): gpu_tests.log
#   dispatch  what an eager update costs its host per method (bench_dispatch.py: tiny widths, where
#           the kernels wait on the host; bf16; VARIANTS, default relative absolute), ops and time
#           per update against the sinusoid, in about a minute: dispatch.md
#   speed   training tokens/s of VARIANTS (default relative absolute; any of bench_train.py's
#           position methods) on transformer_base, bf16 and fp16, ~25k-token batches (BENCH_ARGS
#           adds bench_train.py options, e.g. --profile); the attention core and every method's
#           self-attention up to n = 4096; beam-4 decoding: speed_*.md
#   train   the speed stage's training benchmark alone (eager): speed_train.md
#   compiled  the speed stage's training benchmark with every variant under torch.compile, as
#           train.compile=true runs it (symbolic shapes; warmed up on every batch first):
#           speed_compiled.md. The updates were host-bound in eager mode (the second sitting).
#           COMPILE_SCOPE: layers (default: each layer, as train.compile_scope) or model. The whole
#           model took ~200 s to compile and ~90 s per recompile on the H100 machine (the fourth
#           sitting: 4 compiles in 8 batches, none timed); by layers the warm-up took 109 s for Shaw
#           and 47 s for the sinusoid (the fifth). BENCH_ARGS=--profile adds, after the rounds, each
#           variant's host and device time per update and its costliest kernels
#   byquery  the train and compiled stages' benchmark with Shaw's terms as the paper computes them
#           (bench_train.py --by-query: attention_kernels.ByQuery, matmuls batched over the queries,
#           no gather or scatter-add over the batch), eager with peak memory, then compiled
#           (COMPILE_SCOPE): speed_by_query.md, speed_by_query_compiled.md; read beside train's and
#           compiled's figures to decide BY_QUERY_DEVICES
#   layers  an encoder layer (D 512, ~4096 tokens per batch, bf16) with Shaw's terms by gather, per
#           diagonal and by query against the plain layer at each n of LAYER_N (default
#           64,128,192,256: DIAGONALS_ABOVE and BY_QUERY_DEVICES timed inside a layer; 15-20 s
#           for five n at 21 rounds on the H100): speed_layers.md
#   onmt    OpenNMT-py 3.5.1 on the same model and batch, relative and absolute: onmt_train.md
#   decode  beam-4 decoding of test_2016_flickr, rpr-nmt beside OpenNMT-py, each on a model of the
#           same size (transformer_small, k = 16) it trained for DECODE_STEPS updates (default 2000) so
#           that outputs have real lengths: sentences/s and BLEU (decode_*.md, decode_*/ folders)
#   sweep   the k sweep on the GPU, transformer_small with the demo's recipe: SEEDS (default 1)
#           x K (default 0,2,16,64), STEPS updates (default 3000, validation BLEU every
#           VALID_EVERY = 1000), JOBS runs at once on the one GPU (default 4), stopped after
#           SWEEP_MINUTES (default 7); finished runs collected into sweep/, every run's metrics.jsonl
#           (validation BLEU by update) into sweep/metrics/. Sized by the H100 (2026-11-26): four
#           runs at once trained 16-17 updates/s each, so the defaults end in about 4 minutes; more
#           seeds in further calls (SEEDS=2, SEEDS=3) while the machine is warm
#
# On a machine without CUDA, DEVICE=cpu with small STEPS / ROUNDS / MAX_N / SENTENCES runs the same
# commands (a smoke run); EXTRA adds overrides to the sweep's runs.
set -uo pipefail
cd "$(dirname "$0")/.."
RETURN=${RESULTS:-${OUT:?set OUT or RESULTS to the folder that receives the results}}
SITTING=${SITTING:-/tmp/gpu_sitting}  # what the stages write; packed into $RETURN at the end
[ "$(realpath -m "$RETURN")" != "$(realpath -m "$SITTING")" ] || { echo "SITTING must differ from $RETURN" >&2; exit 2; }
mkdir -p "$RETURN" "$SITTING"
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 RPR_NMT_DATA=${RPR_NMT_DATA:-$PWD/.device/data}
export RPR_NMT_RUNS=${RPR_NMT_RUNS:-/tmp/rpr_runs}

if [ -d .whl ] && ! "$PY" -c "import hydra" 2>/dev/null; then  # the wheels the machine lacks
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONPATH=${PYTHONPATH:-$PWD}

stage_env() {
  { date -u +%FT%TZ; uname -a; nvidia-smi 2>&1 | head -15
    "$PY" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda',
torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
    "$PY" -m pip list 2>/dev/null |
      grep -i -E "^(torch|hydra|omegaconf|sacrebleu|sentencepiece|triton|numpy) "
    git log -1 --format='commit %H %cI' 2>/dev/null || true
    echo "cores $(nproc); load $(cat /proc/loadavg)"; grep '^cpu ' /proc/stat  # steal: 8th number
  } > "$SITTING/env.txt" 2>&1
  cat "$SITTING/env.txt"
}

stage_tests() {
  # TESTS narrows the run (tests/gpu: the model and decoding, without the trainer's ~3 minutes).
  # No -q: pyproject's addopts has one, and a second hides the summary line.
  "$PY" -m pytest -m gpu -p no:cacheprovider -rs ${TESTS:-tests} 2>&1 |
    tee "$SITTING/gpu_tests.log" | tail -30
}

bench_training() {  # FILE [OPTION ...]: bench_train.py on the sitting's model and batch, into FILE
  local file=$1
  shift
  "$PY" scripts/bench_train.py --device "$DEVICE" --model "${MODEL:-transformer_base}" \
    --max-tokens "${MAX_TOKENS:-25000}" --precisions ${PRECISIONS:-bf16 fp16} \
    --rounds "${ROUNDS:-5}" --steps "${BENCH_STEPS:-10}" --variants ${VARIANTS:-relative absolute} \
    "$@" ${BENCH_ARGS:-} 2>&1 | tee "$SITTING/$file" | tail -16
}

stage_dispatch() {
  "$PY" scripts/bench_dispatch.py --device "$DEVICE" --precision bf16 \
    --rounds "${DISPATCH_ROUNDS:-9}" --variants ${VARIANTS:-relative absolute} 2>&1 |
    tee "$SITTING/dispatch.md" | tail -12
}

stage_train() {
  bench_training speed_train.md
}

stage_speed() {
  local rounds=${ROUNDS:-5}
  stage_train
  "$PY" scripts/bench_attention.py --device "$DEVICE" --dtype bfloat16 --max-n "${MAX_N:-4096}" \
    --rounds "$rounds" 2>&1 | tee "$SITTING/speed_attention.md" | tail -30
  "$PY" scripts/bench_decode.py --device "$DEVICE" --model "${MODEL:-transformer_base}" \
    --batch "${DECODE_BATCH:-256}" --streams 1 --repeats 2 --sentences "${SENTENCES:-1000}" \
    --uncached-sentences "${UNCACHED:-256}" \
    2>&1 | tee "$SITTING/speed_decode.md" | tail -10
}

stage_compiled() {
  # No peak-memory processes: each would compile the model again (the third sitting's stage ran out
  # of time). Dynamo's recompiles and graph breaks are logged beside the figures.
  TORCH_LOGS=${TORCH_LOGS:-recompiles,graph_breaks} bench_training speed_compiled.md \
    --compile "${COMPILE_SCOPE:-layers}" --no-memory
}

stage_layers() {
  "$PY" scripts/bench_attention.py --device "$DEVICE" --dtype bfloat16 --skip-core \
    --skip-positions --layer-n "${LAYER_N:-64,128,192,256}" --layer-rounds "${LAYER_ROUNDS:-21}" \
    2>&1 | tee "$SITTING/speed_layers.md" | tail -40
}

stage_byquery() {
  bench_training speed_by_query.md --by-query
  bench_training speed_by_query_compiled.md --by-query --no-memory --compile "${COMPILE_SCOPE:-layers}"
}

# OpenNMT-py 3.5.1: its own scripts (../shared/peers/opennmt, copied to .device/peers/opennmt) with a
# virtualenv-shaped folder of wrappers over its wheels (.whl_onmt: OpenNMT-py --no-deps and the
# runtime packages it imports that the machine lacks); its corpus prepared once in WORK.
ONMT_VENV=${ONMT_VENV:-/tmp/onmt_venv} PEERS=${PEERS_DIR:-.device/peers/opennmt}
onmt_ready() {
  local venv=$ONMT_VENV
  if [ ! -x "$venv/bin/onmt_train" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/onmt_site .whl_onmt/*.whl || return 1
    mkdir -p "$venv/bin"
    for tool in train translate; do
      printf '#!/bin/sh\nPYTHONPATH=/tmp/onmt_site exec %s -m onmt.bin.%s "$@"\n' "$PY" "$tool" \
        > "$venv/bin/onmt_$tool"
    done
    printf '#!/bin/sh\nPYTHONPATH=/tmp/onmt_site exec %s "$@"\n' "$PY" > "$venv/bin/python"
    chmod +x "$venv"/bin/*
  fi
  export WORK=/tmp/peers/onmt VENV=$venv
  [ -f "$WORK/data/spm/vocab.shared" ] ||
    SRC_DIR=$RPR_NMT_DATA/multi30k PY=$venv/bin/python bash "$PEERS/prepare.sh" \
      > "$SITTING/onmt_prepare.log" 2>&1
}

stage_onmt() {
  # The same model and batch as `speed` (transformer_base, ~25k tokens, k = 16 or sinusoid).
  # OpenNMT-py 3.5 trains in fp32 or fp16 only.
  onmt_ready || return 1
  local size="-enc_layers 6 -dec_layers 6 -hidden_size 512 -word_vec_size 512 -transformer_ff 2048 -heads 8"
  local gpu="-world_size 1 -gpu_ranks 0 -model_dtype fp16"
  [ "$DEVICE" = cuda ] || gpu=""
  EXTRA="${ONMT_SIZE:-$size} -batch_size ${MAX_TOKENS:-25000} $gpu -warmup_steps 100" REPORT_EVERY=10 \
    TAG=gpu bash "$PEERS/train_bench.sh" both "${ONMT_STEPS:-100}" 2>&1 |
    tee "$SITTING/onmt_train.md" | tail -12
}

stage_decode() {
  local steps=${DECODE_STEPS:-2000} batch=${DECODE_BATCH:-64} run=$RPR_NMT_RUNS/decode_small
  "$PY" -m rpr_nmt.cli.train model=transformer_small train=cpu_short train.device="$DEVICE" \
    train.max_time_minutes=null train.max_steps="$steps" train.valid_every="$steps" \
    train.save_every="$steps" train.evaluate_at_end=false hydra.run.dir="$run" \
    > "$SITTING/decode_rpr_train.log" 2>&1 || { echo "rpr-nmt training failed"; return 1; }
  for precision in fp32 bf16; do
    "$PY" -m rpr_nmt.cli.evaluate checkpoint="$run/checkpoints/last.pt" decode.device="$DEVICE" \
      decode.beam_size=4 decode.length_penalty=0.6 decode.max_sentences="$batch" \
      decode.precision=$precision hydra.run.dir="$SITTING/decode_rpr_$precision" 2>&1 |
      tee "$SITTING/decode_rpr_$precision.md" | grep -E "sentences/s|^BLEU"
  done
  onmt_ready || return 1
  # The peer's recipe for short runs (its train_long.sh): noam, learning rate 0.42, 200 warmup steps.
  local gpu="-world_size 1 -gpu_ranks 0" device=0
  [ "$DEVICE" = cuda ] || { gpu=""; device=-1; }
  EXTRA="-warmup_steps 200 -learning_rate 0.42 $gpu" REPORT_EVERY=100 TAG=decode \
    bash "$PEERS/train_bench.sh" rpr "$steps" > "$SITTING/decode_onmt_train.log" 2>&1 ||
    { echo "OpenNMT-py training failed"; return 1; }
  local out=$SITTING/decode_onmt spm=$WORK/data/spm start end
  mkdir -p "$out"
  start=$(date +%s.%N)
  TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 "$ONMT_VENV/bin/onmt_translate" \
    -model "$WORK/runs/decode_rpr_$steps/model_step_$steps.pt" -src "$spm/test_2016_flickr.en" \
    -output "$out/hyp.spm" -beam_size 4 -batch_size "$batch" -batch_type sents -max_length 250 \
    -length_penalty avg -n_best 1 -report_time -gpu $device > "$out/log.txt" 2>&1 ||
    { echo "onmt_translate failed: $out/log.txt"; return 1; }
  end=$(date +%s.%N)
  "$PY" - "$spm/bpe8k.model" "$out" "$WORK/data/raw/test_2016_flickr.de" "$start" "$end" <<'PY' |
import re, sys
import sacrebleu, sentencepiece
model, out, ref, start, end = sys.argv[1:]
pieces = open(f"{out}/hyp.spm", encoding="utf-8").read().splitlines()
bpe = sentencepiece.SentencePieceProcessor(model_file=model)
hyps = [bpe.decode(p.split()) for p in pieces]
refs = open(ref, encoding="utf-8").read().splitlines()
loop = float(re.search(r"Total translation time \(s\): ([\d.]+)", open(f"{out}/log.txt").read())[1])
print(f"onmt_translate: {len(hyps)} sentences in {loop:.1f} s ({len(hyps) / loop:.1f} sentences/s; "
      f"{float(end) - float(start):.1f} s with loading)")
print(f"BLEU = {sacrebleu.corpus_bleu(hyps, [refs]).score:.2f}")
PY
    tee "$SITTING/decode_onmt.md"
}

stage_sweep() {
  local sweep=$RPR_NMT_RUNS/sweeps/ablate_k_multi30k_en_de
  # SIGTERM after SWEEP_MINUTES: the running runs save and stop (rpr_nmt.cli.sweep_stop), so the
  # collection below still comes back within the device call.
  timeout --signal=TERM "${SWEEP_MINUTES:-7}m" "$PY" -m rpr_nmt.cli.train \
    -m experiment=ablate_k "model.max_relative_position=${K:-0,2,16,64}" \
    "train.seed=${SEEDS:-1}" train=cpu_short train.device="$DEVICE" train.max_time_minutes=null \
    train.max_steps="${STEPS:-3000}" train.valid_every="${VALID_EVERY:-1000}" \
    train.save_every="${VALID_EVERY:-1000}" hydra/launcher=joblib_cpu \
    hydra.launcher.n_jobs="${JOBS:-4}" ${EXTRA:-} > "$SITTING/sweep.log" 2>&1
  echo "sweep exit status $?" | tee -a "$SITTING/sweep.log"
  "$PY" -m rpr_nmt.cli.report --collect "$sweep" --into "$SITTING/sweep/ablate_k_multi30k_en_de_gpu" \
    2>&1 | tail -3
  mkdir -p "$SITTING/sweep/metrics"
  for run in "$sweep"/*/; do  # every run's validation curve, finished or not
    [ -f "$run/metrics.jsonl" ] && cp "$run/metrics.jsonl" "$SITTING/sweep/metrics/$(basename "$run").jsonl"
  done
}

pack_stage() {  # the files SITTING gained since marker $2, into $RETURN/$1.tar.gz
  local name=$1 marker=$2 list
  list=$(mktemp)
  (cd "$SITTING" && find . -type f -newer "$marker" ! -name '.stage_start*') > "$list"
  tar -czf "$RETURN/$name.tar.gz.part" -C "$SITTING" -T "$list" &&
    mv "$RETURN/$name.tar.gz.part" "$RETURN/$name.tar.gz" &&
    echo "packed $(wc -l < "$list") files of $name into $RETURN/$name.tar.gz"
  rm -f "$list"
}

for stage in "$@"; do
  case $stage in
    env|tests|dispatch|train|speed|compiled|byquery|layers|onmt|decode|sweep) ;;
    *) echo "unknown stage $stage: env tests dispatch train speed compiled byquery layers onmt decode sweep" >&2
       exit 2 ;;
  esac
done
# A call cut at its limit (timeout -s TERM signals this script's whole process group) still packs what
# the stage it cut had written, as STAGE_cut.tar.gz: a benchmark's log holds every round it finished.
current=
trap '[ -z "$current" ] || pack_stage "${current}_cut" "$marker"; exit 124' TERM
for stage in "$@"; do
  echo "== $stage $(date -u +%T)"
  marker="$SITTING/.stage_start_$stage"
  touch "$marker"
  sleep 1  # a file written in the marker's second still counts as newer
  current=$stage
  "stage_$stage"
  current=
  pack_stage "$stage" "$marker"
done
