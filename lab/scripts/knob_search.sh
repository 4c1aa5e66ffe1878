#!/usr/bin/env bash
# One GPU call: the knob search (`nodice evolve --agent knobs`, docs/search.md) on each bundled kernel
# that declares KNOBS, in place of the lab's pin sweeps (sweep_norms.py, sweep_gemm_pins.py,
# sweep_decode.py): every setting through the gate, bitwise against the best version, then timed.
#   OUT=... lab/scripts/knob_search.sh [TASK...]      # default: rmsnorm add_rmsnorm gemm attention_decode
# Each run's folder (lineage, journal, report.html) is copied to $OUT/knobs-TASK; BUDGET sets the
# evaluations per task (default 30).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
BUDGET=${BUDGET:-30}
tasks=("$@")
[ ${#tasks[@]} -eq 0 ] && tasks=(rmsnorm add_rmsnorm gemm attention_decode)
mkdir -p "$OUT"
for task in "${tasks[@]}"; do
    run="runs/knobs-$task"
    nodice evolve "$task" --agent knobs --seed "nodice/kernels/$task.py" --device cuda \
        --budget "$BUDGET" --run-dir "$run" 2>&1 | tee "$OUT/knobs-$task.log"
    cp -r "$run" "$OUT/knobs-$task"
done
