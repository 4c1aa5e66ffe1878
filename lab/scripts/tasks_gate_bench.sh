#!/usr/bin/env bash
# One GPU call for tasks new to the GPU: the gate on every bundled example of each task, then the
# benchmark of each task's bundled kernel against its library baselines.
#
# Usage (from the repository root): OUT=/some/dir TASKS="mla_decode dsa" lab/scripts/tasks_gate_bench.sh
#   EXAMPLE_S=240  seconds for the examples (lab/scripts/gate_examples.py: correctness + dynamic
#                  validation in bf16 and the fp32 probe, one seed, a compiling run then a timed one)
#   BENCH_S=300    seconds for `nodice bench kernels --task …` (kernels.sh: baselines from .whl/)
# Outputs in $OUT: gpu_check_examples.json and examples.log; kernels.json, kernels.md, kernels.log.
# NODICE_COMMIT=<hash> where the GPU machine's copy of the repository is not at the commit measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
TASKS=${TASKS:?set TASKS to the tasks to run, e.g. TASKS="mla_decode dsa"}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
task_args=()
for t in $TASKS; do task_args+=(--task "$t"); done
OUT="$OUT" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout "${EXAMPLE_S:-240}" \
  python3 lab/scripts/gate_examples.py "${task_args[@]}" --seeds 0 --runs 2 >"$OUT/examples.log" 2>&1
echo "examples: exit status $? (124: stopped by EXAMPLE_S)" | tee -a "$OUT/examples.log"
tail -40 "$OUT/examples.log"
timeout "${BENCH_S:-300}" bench/gpu/kernels.sh "${task_args[@]}" --timeout "$((${BENCH_S:-300} - 20))" >/dev/null 2>&1
echo "kernels: exit status $? (124: stopped by BENCH_S)"
tail -60 "$OUT/kernels.md" 2>/dev/null
