#!/usr/bin/env bash
# One GPU call for the candidates: smoke test, then the whole gate with the benchmark, then a sweep.
#
# Usage (from anywhere): OUT=/some/dir lab/candidates/measure.sh
#   NCU=1       also profile one representative shape per candidate (ncu --clock-control none)
#   BUDGET=500  seconds after which no new step starts (the call's limit is 600)
#   DEVICE=cpu  a dry run of this script without a GPU: smoke tests under the interpreter, no gate
#
# 1. smoke_gpu.py, one process per candidate: bf16 correctness and bitwise batch invariance of every candidate on small
#    shapes, and the pinned configuration's TFLOP/s on two workloads (~1-2 min, mostly compiles).
# 2. for each candidate that passed the smoke test, in order of expected robustness:
#      python3 -m nodice check FILE --task T --device cuda --bench --json > $OUT/check_NAME.json
#    (static analysis, correctness, dynamic BI in bf16 and the fp32 probe, then every workload
#    against every baseline installed; about 30 s of gate and 40-70 s of attention benchmark).
# 3. with the time left, smoke_gpu.py --sweep: the alternative pins each Triton candidate lists.
# 4. NCU=1: ncu on one workload per passing candidate, if the time allows.
# Every step appends to $OUT/measure.log as it runs; $OUT/summary.txt is rewritten after each step.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
BUDGET=${BUDGET:-500}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# nodice from this checkout; baseline wheels installed by bench/gpu/kernels.sh on a warm machine, if any.
site=${NODICE_SITE:-/tmp/nodice-site}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}$([ -d "$site" ] && echo ":$site")"
here=lab/candidates
log=$OUT/measure.log
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((BUDGET - $(elapsed))); }
step() { echo "[$(elapsed)s] $*" | tee -a "$log"; }
summarize() { python3 "$here/summarize.py" "$OUT" >"$OUT/summary.txt" 2>&1; }
passed_smoke() {  # $1: candidate name; true when its smoke report has no errors
  python3 - "$OUT/smoke_$1.json" "$1" <<'EOF'
import json, sys
try:
    entry = json.load(open(sys.argv[1]))["candidates"].get(sys.argv[2])
except (OSError, ValueError):
    entry = None
sys.exit(0 if entry is not None and not entry["errors"] else 1)
EOF
}
candidates="attention_prefill_tma_ws:attention_prefill gemm_persistent_tma:gemm"
# Candidates the smoke test cannot judge (sampling's correctness is distributional): the gate alone.
gate_only="sampling_split:sampling"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/gpu.csv" 2>&1 || true
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" \
  2>&1 | tee -a "$log"

# One process per candidate: a kernel that hangs or faults (the untested Gluon one) takes only
# its own smoke test down.
for spec in $candidates; do
  name=${spec%%:*}
  step "smoke test: $name"
  timeout 120 python3 "$here/smoke_gpu.py" --device "$DEVICE" --candidate "$name" --report "smoke_$name.json" \
    2>&1 | tee -a "$log"
  step "smoke $name exit status ${PIPESTATUS[0]}"
done
summarize

for spec in $gate_only $candidates; do
  name=${spec%%:*}
  task=${spec##*:}
  if [[ " $gate_only " != *" $spec "* ]] && ! passed_smoke "$name"; then
    step "$name: failed the smoke test, no gate run"
    continue
  fi
  if [ "$DEVICE" != cuda ]; then
    step "$name: dry run, no gate run"
    continue
  fi
  if (($(left) < 120)); then
    step "$name: $(left)s left of the budget, no gate run"
    continue
  fi
  step "gate + benchmark: $name ($task)"
  limit=$(($(left) < 240 ? $(left) : 240))
  timeout "$limit" python3 -m nodice check "$here/$name.py" --task "$task" --device cuda --bench --json \
    --timeout "$((limit - 10))" >"$OUT/check_$name.json" 2>"$OUT/check_$name.err"
  step "$name: nodice check exit status $? (0 pass, 1 rejected, 2 error, 124 timeout)"
  tail -n 5 "$OUT/check_$name.err" | tee -a "$log"
  summarize
done

if [ "$DEVICE" = cuda ] && (($(left) > 60)); then
  step "sweep of the alternative pins ($(left)s left)"
  timeout "$(($(left) + 20))" python3 "$here/smoke_gpu.py" --report sweep.json --sweep \
    --sweep-seconds "$(($(left) - 30))" --candidate gemm_persistent_tma --candidate attention_prefill_tma_ws \
    2>&1 | tee -a "$log"
  step "sweep exit status ${PIPESTATUS[0]}"
  summarize
fi

if [ "${NCU:-0}" = 1 ]; then
  for name in attention_prefill_tma_ws gemm_persistent_tma; do
    if ! passed_smoke "$name" || (($(left) < 30)); then
      continue
    fi
    step "ncu: $name"
    timeout "$(($(left) < 60 ? $(left) : 60))" ncu --clock-control none --set basic -k "regex:_attention_forward|_matmul_persistent" -c 1 \
      --csv --page details python3 "$here/smoke_gpu.py" --profile "$name" >"$OUT/ncu_$name.csv" 2>>"$log"
    step "ncu $name exit status $?"
  done
fi

summarize
cat "$OUT/summary.txt" | tee -a "$log"
step "done"
