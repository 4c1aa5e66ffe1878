#!/usr/bin/env bash
# The kernel benchmark on a GPU machine: every task's bundled kernel against every library baseline.
#
# Usage (from the repository root): OUT=/some/dir bench/gpu/kernels.sh [more `nodice bench kernels` options]
# Installs the baseline wheels carried in .whl/ (bench/gpu/WHEELS.md) into a private folder, then runs
#   nodice bench kernels --device cuda --json $OUT/kernels.json --markdown $OUT/kernels.md
# The JSON is rewritten after every task, so a run stopped by a time limit keeps what it finished;
# run again with --resume to do the rest. Where the GPU machine's copy of the repository is not at
# the commit being measured, set NODICE_COMMIT=<hash> so that the report names the right one.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
source bench/gpu/site.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/gpu.csv" 2>&1 || true
python3 -m nodice bench kernels --device cuda --json "$OUT/kernels.json" --markdown "$OUT/kernels.md" "$@" \
  2>&1 | tee "$OUT/kernels.log"
exit "${PIPESTATUS[0]}"
