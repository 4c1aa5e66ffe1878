#!/usr/bin/env bash
# The detector benchmark on CUDA: label the pool with the brute-force oracle on the GPU(s), then run
# the ablation (static only, dynamic only, full gate) there. Everything lands in $OUT:
#   labels.json                    the pool's labels with the CUDA labels added (CPU labels kept)
#   detector_cuda.json, .md        main pool: every candidate's verdicts and times; the table
#   detector_cuda_heldout.json, .md   the held-out candidates, scored from the same run
#   progress.jsonl, label.log, detector.log
# Usage: OUT=/some/dir bench/detector/gpu.sh [all|label|detector]   (default: all)
# Workers are spread over the visible GPUs (worker i sees GPU i mod #GPUs); on 8 GPUs both phases
# fit one 10-minute call. On one GPU, run the phases in two calls (copy $OUT/labels.json to
# bench/detector/labels.json in between), or pass TASKS="--task rmsnorm --task gemm" to split.
set -euo pipefail
OUT=${OUT:?set OUT to the output folder}
phase=${1:-all}
py=${PYTHON:-python}
tasks=${TASKS:-}
mkdir -p "$OUT"
gpus=$("$py" -c "import torch; print(max(1, torch.cuda.device_count()))")
"$py" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"

if [[ $phase == all || $phase == label ]]; then
  [[ -f "$OUT/labels.json" ]] || cp bench/detector/labels.json "$OUT/labels.json"
  # Compilation and the sweep's bookkeeping are CPU-bound: two oracle workers per GPU.
  # shellcheck disable=SC2086
  "$py" -m nodice bench label --device cuda --out "$OUT/labels.json" --jobs $((2 * gpus)) --timeout 400 $tasks \
    2>&1 | tee "$OUT/label.log"
fi

if [[ $phase == all || $phase == detector ]]; then
  labels=bench/detector/labels.json
  [[ -f "$OUT/labels.json" ]] && labels="$OUT/labels.json"
  # One worker per GPU, so that no two candidates share a device while they are timed.
  # shellcheck disable=SC2086
  "$py" -m nodice bench detector --device cuda --labels "$labels" --jobs "$gpus" --timeout 400 $tasks \
    --progress "$OUT/progress.jsonl" --json "$OUT/detector_all_cuda.json" 2>&1 | tee "$OUT/detector.log"
  for split in main heldout; do
    suffix=$([[ $split == main ]] && echo "" || echo "_heldout")
    "$py" -m nodice bench detector --device cuda --labels "$labels" --rescore "$OUT/detector_all_cuda.json" \
      --split "$split" --json "$OUT/detector_cuda$suffix.json" --markdown "$OUT/detector_cuda$suffix.md" \
      >> "$OUT/detector.log" 2>&1
  done
fi
