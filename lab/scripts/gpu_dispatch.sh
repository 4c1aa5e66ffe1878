#!/usr/bin/env bash
# One GPU call that uses whichever card comes. On an H200: the 32-layer invariance run of
# `nodice bench e2e` (lab/scripts/gpu_e2e.sh; its alone outcomes and gate verdicts kept under /tmp
# for a later call on the same warm machine). On an H100 (those numbers exist already): the fourth
# held-out pool's CUDA candidates on a cold card (lab/scripts/gpu_heldout4_cuda.sh, gate only).
#   NODICE_COMMIT=<hash> OUT=... lab/scripts/gpu_dispatch.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "$gpu" > "$OUT/card.txt"
case "$gpu" in
  *H200*)
    ONLY=invariance INV_LAYERS=32 CONTROL=8 ALONE_DIR=/tmp/nodice-alone XDG_CACHE_HOME=/tmp/nodice-xdg \
      BUDGET=${BUDGET:-580} INV_SECONDS=${INV_SECONDS:-570} lab/scripts/gpu_e2e.sh ;;
  *)
    ONLY=gate BUDGET=${BUDGET:-540} lab/scripts/gpu_heldout4_cuda.sh ;;
esac
