#!/usr/bin/env bash
# One GPU call: the fourth held-out pool's three load_inline CUDA candidates, labelled by the pool
# author's own GPU oracle, then each through the whole gate (`nodice check --reference`, the
# problem at full size).
#   OUT=... BUDGET=540 lab/scripts/gpu_heldout4_cuda.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
H4=bench/detector-heldout4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
BUDGET=${BUDGET:-540} bench/gpu/run_many.sh \
  "gate=360=for c in level1_30_Softsign/cuda_vectorized_float4:level1_30_Softsign level1_29_Softplus/cuda_fast_math_large_batch:level1_29_Softplus level1_93_masked_cumsum/cuda_blocks_per_row_by_batch:level1_93_masked_cumsum; do k=\${c%%:*}; p=\${c##*:}; n=\$(echo \$k | tr / _); python3 -m nodice check $H4/pool/\$k.py --reference $H4/problems/\$p.py --device cuda --json > \$RUN/\$n.json; echo \$k exit \$?; done" \
  "oracle=150=TRITON_INTERPRET=0 python3 $H4/gpu_check_cuda.py --out \$RUN/oracle.json"
cat "$OUT/run_many.log"
for f in "$OUT"/gate/*.json; do python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].rsplit('/',1)[1], d['verdict'], d['reason'][:300]); print('  stages', {k: (v['verdict'], round(v['ms'])) for k, v in d['stages'].items()})" "$f"; done
tail -20 "$OUT/oracle/log" 2>/dev/null
