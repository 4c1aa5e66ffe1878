#!/usr/bin/env bash
# One GPU call: the knob search (`nodice evolve --agent knobs`, docs/search.md) on each bundled kernel
# that declares KNOBS, in place of the lab's pin sweeps: every setting through the gate, bitwise
# against the best version on every workload (unless it moves one of the kernel's ORDER_KNOBS, which
# reorder a sum: those are judged by the gate alone), then timed.
#   OUT=... lab/scripts/knob_search.sh [TASK...]
#   # default: rmsnorm add_rmsnorm gemm attention_decode moe attention_prefill gdn sampling
# Carries .whl/ (the baselines) and .whl-search/ (Optuna and its dependencies: bench/gpu/WHEELS.md).
# Each task runs as one measurement of bench/gpu/run_many.sh (its own time limit TASK_SECONDS,
# default 135; the lineage, journal and report.html of runs/knobs-TASK copied to $OUT/knobs-TASK/run,
# packed into $OUT/results.tar.gz after each); BUDGET_EVALS sets the evaluations per task (default 30);
# KNOB_ARGS is added to each command (`--knob NAME …`: search those knobs only).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
evals=${BUDGET_EVALS:-30}
seconds=${TASK_SECONDS:-135}
tasks=("$@")
[ ${#tasks[@]} -eq 0 ] && tasks=(rmsnorm add_rmsnorm layernorm gemm attention_decode moe attention_prefill gdn sampling)
specs=()
for task in "${tasks[@]}"; do
    # The search stops itself a minute before the measurement's limit (an evaluation in flight finishes
    # first: a decode one took over 25 s), and is killed 15 s before it, so the copy always runs.
    specs+=("knobs-$task=$seconds=timeout -k 5 $((seconds - 15)) python3 -m nodice evolve $task --agent knobs \
--seed nodice/kernels/$task.py --device cuda --budget $evals --time-budget $((seconds - 60)) --run-dir runs/knobs-$task ${KNOB_ARGS:-}; \
rc=\$?; cp -r runs/knobs-$task \$RUN/run; exit \$rc")
done
bench/gpu/run_many.sh "${specs[@]}"
cat "$OUT/run_many.log"
