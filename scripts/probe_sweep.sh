#!/usr/bin/env bash
# The position probe of every finished run of a sweep (docs/results_positions.md, "What each layer
# knows of absolute position"): rpr-nmt-inspect on each run's last checkpoint, then
# scripts/probe_table.py over them all.
#
#   bash scripts/probe_sweep.sh SWEEP_DIR OUT_DIR      # e.g. runs/sweeps/where_positions_multi30k_en_de
#
# Writes OUT_DIR/<run folder>/ (rpr-nmt-inspect's figures, index.md, inspect.json) per run,
# OUT_DIR/probe.md (the table) and OUT_DIR/probe.json (every run's figures). A run inspected
# before (its inspect.json is there) is not inspected again, so the command resumes; unfinished
# runs (no train_summary.json yet, or one that says it was stopped by a signal) are left out.
# A run rpr-nmt-inspect fails on (a damaged checkpoint) is named and left out; the table of the
# others is still written, and the command then exits 1.
# SENTENCES (default 1000) sets --sentences; PY (default .venv/bin/python) the interpreter.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bash scripts/probe_sweep.sh SWEEP_DIR OUT_DIR" >&2; exit 2; }
SWEEP=$1; OUT=$2
SENTENCES=${SENTENCES:-1000}
PY=${PY:-.venv/bin/python}
[ -d "$SWEEP" ] || { echo "probe_sweep: $SWEEP is not a folder" >&2; exit 2; }
[ ! -e "$OUT" ] || [ -d "$OUT" ] || { echo "probe_sweep: $OUT is a file, not a folder" >&2; exit 2; }
case "$SENTENCES" in ''|*[!0-9]*) echo "probe_sweep: SENTENCES=$SENTENCES is not a number" >&2; exit 2;; esac
runs=()
for run in "$SWEEP"/*/; do
  run=${run%/}
  [ -f "$run/train_summary.json" ] || continue
  if grep -q '"stopped_by": *"signal"' "$run/train_summary.json"; then  # its budget not reached
    echo "probe_sweep: $run was stopped before its budget (rerun its sweep to resume it); left out" >&2
    continue
  fi
  if [ ! -f "$run/checkpoints/last.pt" ]; then
    echo "probe_sweep: $run has no checkpoints/last.pt (a collected run?); left out" >&2; continue
  fi
  runs+=("$run")
done
[ ${#runs[@]} -gt 0 ] || { echo "probe_sweep: no finished run with a checkpoint under $SWEEP" >&2; exit 2; }
mkdir -p "$OUT"
probed=(); failed=()
for run in "${runs[@]}"; do
  out=$OUT/$(basename "$run")
  if [ ! -f "$out/inspect.json" ]; then
    echo "== $(basename "$run")"
    if ! "$PY" -m rpr_nmt.cli.inspect "$run/checkpoints/last.pt" -o "$out" --sentences "$SENTENCES"; then
      echo "probe_sweep: $run: rpr-nmt-inspect failed (above); left out" >&2
      failed+=("$run"); continue
    fi
  fi
  probed+=("$out")
done
[ ${#probed[@]} -gt 0 ] || { echo "probe_sweep: rpr-nmt-inspect failed on every run: ${failed[*]}" >&2; exit 1; }
"$PY" "$(dirname "$0")/probe_table.py" "${probed[@]}" --json "$OUT/probe.json" | tee "$OUT/probe.md"
[ ${#failed[@]} -eq 0 ] || { echo "probe_sweep: ${#failed[@]} run(s) left out: ${failed[*]}" >&2; exit 1; }
