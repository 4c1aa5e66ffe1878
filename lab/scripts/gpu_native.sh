#!/usr/bin/env bash
# One GPU call: native solutions through the whole gate on CUDA (FlashInfer-Bench CUDA solutions,
# KernelBench load_inline candidates of the third held-out pool), a coupling KernelBench problem, and
# the bundled rmsnorm through the sandbox (workers forked from the fork server on a CUDA machine).
#   OUT=... BUDGET=540 lab/scripts/gpu_native.sh
# Carries .whl-fib/ (flashinfer-bench and the pure-Python packages it imports; not in the image).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
fib_site=/tmp/nodice-fib-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$fib_site" .whl-fib/*.whl \
  || echo "installing .whl-fib failed" >&2
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$fib_site"
python3 -c "import sys; print(sys.version); import flashinfer_bench.data; print('flashinfer_bench ok')" > "$OUT/fib_import.txt" 2>&1
FIB=nodice/examples/flashinfer_bench
H3=bench/detector-heldout3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
# ONLY=name,name runs those measurements alone (bench/gpu/run_many.sh). KB (candidate:problem pairs
# of the third held-out pool) and KB_SECONDS narrow the KernelBench measurement; FIB_SECONDS bounds the
# FlashInfer-Bench one.
KB=${KB:-level1_23_Softmax/cuda_block_per_row:level1_23_Softmax level1_36_RMSNorm_/cuda_per_position:level1_36_RMSNorm_ level1_47_Sum_reduction_over_a_dimension/cuda_atomic_split:level1_47_Sum_reduction_over_a_dimension level1_48_Mean_reduction_over_a_dimension/cuda_warp_or_thread_by_batch:level1_48_Mean_reduction_over_a_dimension level1_3_Batched_matrix_multiplication/tf32_switch_large_batch:level1_3_Batched_matrix_multiplication}
BUDGET=${BUDGET:-540} bench/gpu/run_many.sh \
  "smoke=100=python3 -m nodice check nodice/kernels/rmsnorm.py -t rmsnorm --device cuda --bench --json > \$RUN/check.json" \
  "fib_cuda=${FIB_SECONDS:-300}=for s in row split; do python3 -m nodice check $FIB/rmsnorm_h4096_cuda_\$s.json --definition $FIB/rmsnorm_h4096.json --device cuda --json > \$RUN/\$s.json; echo \$s exit \$?; done; python3 -m nodice check $FIB/rmsnorm_h4096_cuda_split.json --definition $FIB/rmsnorm_h4096.json --device cuda --dynamic-only --json > \$RUN/split_dynamic.json; echo split_dynamic exit \$?" \
  "kb_cuda=${KB_SECONDS:-420}=for c in $KB; do k=\${c%%:*}; p=\${c##*:}; n=\$(echo \$k | tr / _); python3 -m nodice check $H3/pool/\$k.py --reference $H3/problems/\$p.py --device cuda --json > \$RUN/\$n.json; echo \$k exit \$?; done" \
  "kb_coupling=90=python3 -m nodice check $H3/problems/level1_33_BatchNorm.py --reference $H3/problems/level1_33_BatchNorm.py --entry Model --device cuda --json > \$RUN/batchnorm.json; echo exit \$?"
cat "$OUT/run_many.log"
for f in "$OUT"/*/*.json; do
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].rsplit('/',2)[-2:], d.get('verdict'), (d.get('reason') or '')[:240]); print('  stages', {k: (v['verdict'], round(v['ms'])) for k, v in (d.get('stages') or {}).items()})" "$f" 2>/dev/null || echo "$f: no JSON"
done
exit 0
