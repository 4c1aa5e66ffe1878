#!/usr/bin/env bash
# One GPU call: the gemm task's invariant baselines (cuBLASLt without split-K, sgemm-bi; carry .whl/).
#   OUT=... lab/scripts/gemm_baselines.sh
# probe   lab/scripts/gemm_baselines.py: the zero-workspace algorithm per shape (tile, split count),
#         and row 0's bits at M = 1, 8, 64, 512 against M = 1 for every gemm baseline
# bench   nodice bench kernels --task gemm (every baseline's BI audit, then the timed table)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
BUDGET=${BUDGET:-570} bench/gpu/run_many.sh \
  "probe=90=python3 lab/scripts/gemm_baselines.py --json \$RUN/probe.json" \
  "bench=${BENCH_SECONDS:-450}=python3 -m nodice bench kernels --device cuda --task gemm --json \$RUN/kernels.json --markdown \$RUN/kernels.md"
cat "$OUT/run_many.log"
