#!/usr/bin/env bash
# One GPU call: the gemm kernel's SPLIT_K pin (fixed K segments summed in order) against the shipped
# sum and cuBLAS, with row 0's bits across M first (lab/scripts/gemm_split.py).
#   OUT=... lab/scripts/gemm_split.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
BUDGET=${BUDGET:-300} bench/gpu/run_many.sh \
  "split=${SPLIT_SECONDS:-280}=python3 lab/scripts/gemm_split.py --json \$RUN/gemm_split.json"
cat "$OUT/run_many.log"
grep -h "" "$OUT/split/log" 2>/dev/null | tail -80
