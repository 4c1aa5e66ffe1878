#!/usr/bin/env bash
# One GPU call for the detector benchmark on CUDA: the brute-force oracle labels the pool's
# candidates that have no current CUDA label yet, then the gate's three configurations run on every
# labeled one (resuming an earlier call's progress file), and everything is packed into one archive.
# Calls resume each other: carry the previous call's labels and progress back into the working tree
# (LABELS_IN, PROGRESS_IN) and run again until both steps report nothing left.
#
# Usage (from the repository root):
#   OUT=/some/dir POOL=bench/detector-heldout2 bench/gpu/detector.sh
#   POOL         pool folder (labels.json, pool/); default bench/detector-heldout2
#   LABELS_IN    labels file to start from (default POOL/labels.json: CPU labels, no CUDA ones)
#   PROGRESS_IN  an earlier call's detector progress file (JSON lines) to resume
#   BUDGET=540   seconds for the whole call; the oracle gets LABEL_SHARE per cent of it (default 55)
#   JOBS=4       oracle workers side by side on the GPU
#   TIMEOUT=240  seconds per candidate (oracle and gate alike)
#   TASKS        only these tasks (space-separated), default all
#   DEVICE=cuda  (cpu for a dry run on a machine without a GPU)
# Outputs in $OUT: results.tar.gz holding labels.json (the pool's labels with this device's added),
# detector.jsonl, detector.json (when every labeled candidate is scored; for the main pool also
# detector_main.json/.md and detector_heldout.json/.md, its two splits), label.log, detector.log.
# Copy labels.json over POOL/labels.json and the reports to bench/results/.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
POOL=${POOL:-bench/detector-heldout2}
DEVICE=${DEVICE:-cuda}
BUDGET=${BUDGET:-540}
LABEL_S=$((BUDGET * ${LABEL_SHARE:-55} / 100))
JOBS=${JOBS:-4}
TIMEOUT=${TIMEOUT:-240}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)
task_args=()
for t in ${TASKS:-}; do task_args+=(--task "$t"); done

cp "${LABELS_IN:-$POOL/labels.json}" "$OUT/labels.json"
[ -n "${PROGRESS_IN:-}" ] && cp "$PROGRESS_IN" "$OUT/detector.jsonl"
touch "$OUT/detector.jsonl"

# The oracle labels the candidates still without a current label for this device.
timeout "$LABEL_S" python3 -m nodice bench label --device "$DEVICE" --pool "$POOL" --out "$OUT/labels.json" \
  --missing --jobs "$JOBS" --timeout "$TIMEOUT" "${task_args[@]}" >"$OUT/label.log" 2>&1
echo "oracle: exit status $? (124: stopped by its share of BUDGET; labels so far are saved)" | tee -a "$OUT/label.log"

left=$((BUDGET - ($(date +%s) - start) - 15))
if [ "$left" -gt 30 ]; then
  timeout "$left" python3 -m nodice bench detector --device "$DEVICE" --pool "$POOL" --labels "$OUT/labels.json" \
    --jobs 1 --timeout "$TIMEOUT" --progress "$OUT/detector.jsonl" --resume --json "$OUT/detector.json" \
    "${task_args[@]}" >"$OUT/detector.log" 2>&1
  echo "detector: exit status $? (124: stopped by BUDGET; the progress file keeps what finished)" | tee -a "$OUT/detector.log"
fi
# The main pool holds main and held-out candidates: one table for each, rescored from the same run.
if [ -f "$OUT/detector.json" ] && [ "$(cd "$POOL" && pwd)" = "$PWD/bench/detector" ]; then
  for split in main heldout; do
    python3 -m nodice bench detector --device "$DEVICE" --pool "$POOL" --labels "$OUT/labels.json" \
      --rescore "$OUT/detector.json" --split "$split" --json "$OUT/detector_$split.json" \
      --markdown "$OUT/detector_$split.md" >>"$OUT/detector.log" 2>&1
  done
fi
tail -30 "$OUT/detector.log" 2>/dev/null
(cd "$OUT" && tar czf results.tar.gz labels.json detector.jsonl label.log \
  $(ls detector.json detector.log detector_main.* detector_heldout.* 2>/dev/null))
