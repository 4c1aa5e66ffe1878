#!/usr/bin/env bash
# Two GPU calls on one warm machine: the gdn task against fla and FlashInfer's GDN prefill, whose SM90
# kernel needs the CuTe DSL that travels in two parts with flash-attn-4 (bench/gpu/WHEELS.md).
#   lab/scripts/gdn_baselines.sh stage        # call 1, carrying .whl and .whl-fa4/1
#   OUT=... lab/scripts/gdn_baselines.sh run  # call 2, carrying .whl-fa4/2, within 30 s of call 1
# run: nodice bench kernels --task gdn (every baseline's BI audit, then the timed table), TASKS to
# measure more tasks in the same run (e.g. TASKS="gdn rmsnorm" adds quack's RMSNorm).
set -uo pipefail
cd "$(dirname "$0")/../.."
case ${1:-} in
  stage)
    bench/gpu/join_fa4.sh stage
    source bench/gpu/site.sh
    python3 -c "import flashinfer, liger_kernel; print('staged: flashinfer', flashinfer.__version__)"
    ;;
  run)
    OUT=${OUT:?set OUT}
    mkdir -p "$OUT"
    bench/gpu/join_fa4.sh join
    source bench/gpu/site.sh
    python3 -c "from nodice.measuring.baselines.attention_prefill import put_cutlass_dsl_on_path as p; p()
import flashinfer.gdn_kernels as k; print('sm90 gdn prefill:', k.chunk_gated_delta_rule_sm90)" \
      >"$OUT/import.txt" 2>&1
    cat "$OUT/import.txt"
    args=()
    for t in ${TASKS:-gdn}; do args+=(--task "$t"); done
    timeout "${BENCH_SECONDS:-500}" python3 -m nodice bench kernels --device cuda "${args[@]}" \
      --json "$OUT/kernels.json" --markdown "$OUT/kernels.md" >"$OUT/kernels.log" 2>&1
    tail -40 "$OUT/kernels.log"
    ;;
  *)
    echo "usage: $0 stage|run" >&2
    exit 2
    ;;
esac
