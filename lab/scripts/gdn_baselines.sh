#!/usr/bin/env bash
# GPU calls on one warm machine: the gdn task against fla and FlashInfer's GDN prefill, whose SM90
# kernel needs nvidia-cutlass-dsl (the CuTe DSL, 96 MiB of wheels), sent in parts by bench/gpu/chunks.sh:
#   here:   bench/gpu/chunks.sh pack cutedsl 30 <the nvidia_cutlass_dsl* and protobuf wheels of .whl-fa4>
#   call 1..3 (carry .whl-chunks/cutedsl/1, /2, /3):  lab/scripts/gdn_baselines.sh stage
#   call 4 (carry .whl and .whl-chunks/cutedsl/4):    OUT=... lab/scripts/gdn_baselines.sh run
# run: nodice bench kernels --task gdn (every baseline's BI audit, then the timed table); TASKS to
# measure more tasks in the same run (e.g. TASKS="gdn rmsnorm").
set -uo pipefail
cd "$(dirname "$0")/../.."
case ${1:-} in
  stage)
    bench/gpu/chunks.sh stage
    ;;
  run)
    OUT=${OUT:?set OUT}
    mkdir -p "$OUT"
    bench/gpu/chunks.sh stage >/dev/null
    bench/gpu/chunks.sh unpack cutedsl /tmp/nodice-cutedsl
    source bench/gpu/site.sh
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      /tmp/nodice-cutedsl/*.whl
    python3 -c "from nodice.measuring.baselines.attention_prefill import put_cutlass_dsl_on_path as p; p()
import flashinfer.gdn_kernels as k; print('sm90 gdn prefill:', k.chunk_gated_delta_rule_sm90)" \
      >"$OUT/import.txt" 2>&1
    cat "$OUT/import.txt"
    args=()
    for t in ${TASKS:-gdn}; do args+=(--task "$t"); done
    timeout "${BENCH_SECONDS:-480}" python3 -m nodice bench kernels --device cuda "${args[@]}" \
      --json "$OUT/kernels.json" --markdown "$OUT/kernels.md" >"$OUT/kernels.log" 2>&1
    echo "bench exit $?"
    tail -40 "$OUT/kernels.log"
    ;;
  *)
    echo "usage: $0 stage|run" >&2
    exit 2
    ;;
esac
