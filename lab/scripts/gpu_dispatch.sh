#!/usr/bin/env bash
# GPU calls that use whichever card comes. STEP picks the call (1 by default).
# On an H200:
#   STEP=1  the 32-layer invariance run of `nodice bench e2e` (lab/scripts/gpu_e2e.sh; its alone
#           outcomes and gate verdicts kept under /tmp for the next call on the same warm machine),
#           then the tax at concurrency 32 (STEP=0: the invariance alone, with the whole call)
#   STEP=2  the tax at concurrency 32 and 64: nodice, paged|sdpa, paged|sdpa+cuda-graphs
#   STEP=3  native solutions through the whole gate (lab/scripts/gpu_native.sh; carry .whl-fib)
#   STEP=5  the same, and nothing at all on another card (a try for an H200 that costs little)
#   STEP=6  STEP=1 on an H200, nothing on another card
#   STEP=7  STEP=1 on an H200; on another card attention_decode's settings in DECODE_ARGS
#   STEP=8  any card: the ragged prefill candidate (lab/candidates/attention_varlen_gluon.py) against
#           the seed and an fp32 reference (lab/scripts/varlen_gpu.py), then the whole gate with its
#           benchmark, then the bundled kernel's benchmark row by row in the same call
#   STEP=9  STEP=1 on an H200, STEP=8 on another card
#   STEP=10 any card: the persistent ragged prefill candidate (lab/candidates/attention_varlen_persistent.py)
#           against the seed and fp32 (hang-guarded), timed beside the per-tile candidate and FlashInfer
#           (bit-equal to the per-tile one), then the whole gate with its benchmark
#           (lab/scripts/decode_settings.py arguments: --setting …, --workload …)
# On an H100 (the H200 steps' H100 numbers exist already):
#   STEP=3|4  attention_decode's knobs by hand, the register cap first (lab/scripts/decode_settings.py)
#   other     the knob search on the kernels whose bandwidth targets are open (decode, the norms;
#             lab/scripts/knob_search.sh; carry .whl, .whl-search).
#   NODICE_COMMIT=<hash> STEP=1 OUT=... lab/scripts/gpu_dispatch.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "$gpu" > "$OUT/card.txt"
export XDG_CACHE_HOME=/tmp/nodice-xdg
case "$gpu:${STEP:-1}" in
  *H200*:1|*H200*:6)
    # Both in one call: the invariance (253 s on an H100) and the tax at concurrency 32.
    INV_LAYERS=32 CONTROL=8 ALONE_DIR=/tmp/nodice-alone INV_SECONDS=${INV_SECONDS:-320} \
      TAX_PHASES=tax TAX_RUN_SECONDS=${TAX_RUN_SECONDS:-30} TAX_SECONDS=${TAX_SECONDS:-250} \
      TAX_EXTRA=${TAX_EXTRA:-"--concurrency 32 -b nodice -b 'paged|sdpa' -b 'paged|sdpa+cuda-graphs'"} \
      BUDGET=${BUDGET:-585} lab/scripts/gpu_e2e.sh ;;
  *H200*:0)
    ONLY=invariance INV_LAYERS=32 CONTROL=8 ALONE_DIR=/tmp/nodice-alone \
      BUDGET=${BUDGET:-580} INV_SECONDS=${INV_SECONDS:-570} lab/scripts/gpu_e2e.sh ;;
  *H200*:2)
    ONLY=tax TAX_PHASES=tax TAX_RUN_SECONDS=${TAX_RUN_SECONDS:-30} BUDGET=${BUDGET:-580} TAX_SECONDS=${TAX_SECONDS:-570} \
      TAX_EXTRA="--concurrency 32 --concurrency 64 -b nodice -b 'paged|sdpa' -b 'paged|sdpa+cuda-graphs'" \
      lab/scripts/gpu_e2e.sh ;;
  *H200*:3|*H200*:5)
    BUDGET=${BUDGET:-560} lab/scripts/gpu_native.sh ;;
  *H200*:9)
    STEP=1 exec "$0" ;;
  *:8|*:9)
    BUDGET=${BUDGET:-570} bench/gpu/run_many.sh \
      "varlen_check=120=python3 lab/scripts/varlen_gpu.py --json \$RUN/varlen_gpu.json" \
      "varlen_gate=300=python3 -m nodice check lab/candidates/attention_varlen_gluon.py --task attention_varlen --device cuda --bench --json --timeout 290 > \$RUN/check.json" \
      "varlen_seed=140=python3 -m nodice bench kernels --device cuda --task attention_varlen --json \$RUN/kernels.json --markdown \$RUN/kernels.md"
    cat "$OUT/run_many.log"; tail -30 "$OUT/varlen_check/log" 2>/dev/null; tail -5 "$OUT/varlen_gate/log" 2>/dev/null ;;
  *:10)
    BUDGET=${BUDGET:-560} bench/gpu/run_many.sh \
      "pcheck=60=python3 lab/scripts/varlen_gpu.py --candidate lab/candidates/attention_varlen_persistent.py --json \$RUN/varlen_gpu.json" \
      "perf=150=python3 lab/scripts/varlen_perf.py --json \$RUN/perf.json lab/candidates/attention_varlen_gluon.py lab/candidates/attention_varlen_persistent.py --baseline 'FlashInfer batch prefill'" \
      "pgate=240=python3 -m nodice check lab/candidates/attention_varlen_persistent.py --task attention_varlen --device cuda --bench --json --timeout 230 > \$RUN/check.json"
    cat "$OUT/run_many.log"; tail -12 "$OUT/pcheck/log" 2>/dev/null; tail -12 "$OUT/perf/log" 2>/dev/null ;;
  *H200*:7)
    STEP=1 exec "$0" ;;
  *:7)
    BUDGET=${BUDGET:-560} bench/gpu/run_many.sh \
      "decode=${DECODE_SECONDS:-540}=python3 lab/scripts/decode_settings.py --json \$RUN/decode_settings.json ${DECODE_ARGS:-}"
    cat "$OUT/run_many.log"; tail -60 "$OUT/decode/log" 2>/dev/null ;;
  *:5|*:6)
    echo "STEP=${STEP} runs on an H200 only; this card is $gpu: nothing run" ;;
  *:3|*:4)
    BUDGET=${BUDGET:-560} bench/gpu/run_many.sh \
      "decode=${DECODE_SECONDS:-540}=python3 lab/scripts/decode_settings.py --json \$RUN/decode_settings.json"
    cat "$OUT/run_many.log"; tail -60 "$OUT/decode/log" 2>/dev/null ;;
  *)
    TASK_SECONDS=${TASK_SECONDS:-170} BUDGET_EVALS=${BUDGET_EVALS:-40} \
      lab/scripts/knob_search.sh ${KNOB_TASKS:-attention_decode rmsnorm add_rmsnorm} ;;
esac
