#!/usr/bin/env bash
# One GPU call: `nodice bench e2e` at Llama-3-8B dimensions (hidden 4096, 32 heads / 8 kv heads,
# head dim 128, intermediate 14336, vocab 128256; random bf16 weights) on the H200.
#   OUT=... lab/scripts/gpu_e2e.sh            # the recorded run (about 9 minutes)
#   OUT=... lab/scripts/gpu_e2e.sh --tiny     # the same steps on the tiny CPU preset (a minute)
# Two measurements (bench/gpu/run_many.sh: each its own time limit, folder and log, packed into
# $OUT/results.tar.gz after each; JSON and Markdown are also rewritten after every phase):
#   invariance  112 requests (16-1024 prompt tokens, 32-160 generated: >= 10,000 tokens) alone and
#               under three schedules, nodice against paged|sdpa (and paged|flash_attention_2 where
#               installed), greedy and seeded sampling; INV_LAYERS decoder layers (default 8: the
#               112 requests alone, one after another, are most of the time, and scale with layers)
#   tax         tokens/s and time per decode step at concurrency 32 and 64, prefill-heavy and
#               decode-heavy mixes, and one forward pass timed alone; TAX_LAYERS (default 32: all)
# Needs transformers 5.17 in the image (no wheel is carried). BUDGET bounds the call (default 540 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
tiny=0
[ "${1:-}" = "--tiny" ] && tiny=1
python3 - > "$OUT/environment.txt" 2>&1 <<'PY'
import sys, torch, triton
print(sys.version)
print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.cuda.is_available())
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(), round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1), "GiB")
import transformers
print("transformers", transformers.__version__)
try:
    import flash_attn
    print("flash_attn", flash_attn.__version__)
except ImportError:
    print("flash_attn: not installed (paged|flash_attention_2 not measured)")
PY
cat "$OUT/environment.txt"
if [ "$tiny" = 1 ]; then
  common="--preset tiny --layers 1 --requests 3 --no-verify --device ${DEVICE:-cpu}"
  inv_args="$common"
  tax_args="$common --concurrency 2"
  inv_s=300
  tax_s=300
else
  inv_args="--preset 8b --layers ${INV_LAYERS:-8} --device cuda"
  tax_args="--preset 8b --layers ${TAX_LAYERS:-32} --device cuda"
  inv_s=${INV_SECONDS:-290}
  tax_s=${TAX_SECONDS:-230}
fi
BUDGET=${BUDGET:-540} bench/gpu/run_many.sh \
  "invariance=$inv_s=python3 -m nodice bench e2e $inv_args --phase invariance --json \$RUN/e2e.json --markdown \$RUN/e2e.md" \
  "tax=$tax_s=python3 -m nodice bench e2e $tax_args --phase tax --phase forward --no-sample --json \$RUN/e2e.json --markdown \$RUN/e2e.md"
cat "$OUT/run_many.log"
for phase in invariance tax; do
  [ -f "$OUT/$phase/e2e.md" ] && cat "$OUT/$phase/e2e.md"
done
exit 0
