#!/usr/bin/env bash
# The detector benchmark on CUDA: label the pool with the brute-force oracle on the GPU(s), then run
# the ablation (static only, dynamic only, full gate) there. Everything lands in $OUT:
#   labels.json           the pool's labels with the CUDA labels added (the CPU labels are kept)
#   detector_cuda.json    the benchmark report
#   label.log, detector.log
# Usage: OUT=/some/dir bench/detector/gpu.sh [all|label|detector]   (default: all)
# Workers are spread over the visible GPUs (worker i sees GPU i mod #GPUs).
set -euo pipefail
OUT=${OUT:?set OUT to the output folder}
phase=${1:-all}
py=${PYTHON:-python}
mkdir -p "$OUT"
gpus=$("$py" -c "import torch; print(max(1, torch.cuda.device_count()))")
"$py" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"

if [[ $phase == all || $phase == label ]]; then
  [[ -f "$OUT/labels.json" ]] || cp bench/detector/labels.json "$OUT/labels.json"
  # Compilation is CPU-bound: two oracle workers per GPU keep both busy.
  "$py" -m nodice bench label --device cuda --out "$OUT/labels.json" --jobs $((2 * gpus)) --timeout 400 \
    2>&1 | tee "$OUT/label.log"
fi

if [[ $phase == all || $phase == detector ]]; then
  labels=bench/detector/labels.json
  [[ -f "$OUT/labels.json" ]] && labels="$OUT/labels.json"
  # One worker per GPU, so that no two candidates share a device while they are timed.
  "$py" -m nodice bench detector --device cuda --labels "$labels" --jobs "$gpus" --timeout 400 \
    --json "$OUT/detector_cuda.json" 2>&1 | tee "$OUT/detector.log"
fi
