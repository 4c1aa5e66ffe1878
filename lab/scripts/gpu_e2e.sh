#!/usr/bin/env bash
# One GPU call: `nodice bench e2e` at Llama-3-8B dimensions (hidden 4096, 32 heads / 8 kv heads,
# head dim 128, intermediate 14336, vocab 128256; random bf16 weights).
#   OUT=... lab/scripts/gpu_e2e.sh            # both measurements (about 9.5 minutes)
#   ONLY=tax TAX_SECONDS=445 OUT=... lab/scripts/gpu_e2e.sh   # the whole tax, a call of its own
#   OUT=... lab/scripts/gpu_e2e.sh --tiny     # the same steps on the tiny CPU preset (a minute)
# Two measurements (bench/gpu/run_many.sh: each its own time limit, folder and log, packed into
# $OUT/results.tar.gz after each; the JSON is rewritten after every phase and timed run):
#   invariance  112 requests (16-1024 prompt tokens, 32-160 generated: >= 10,000 tokens) alone and
#               under three schedules with nodice, greedy; the stock paged|sdpa (and
#               paged|flash_attention_2 where installed) and nodice's seeded sampling on the first
#               CONTROL requests (default 8); INV_LAYERS decoder layers (default 2: the requests
#               alone, one token per forward pass, are most of the time). On an H100: the BI gate
#               91 s (its verdicts are cached on disk for the second process, or carried in
#               XDG_CACHE_HOME to a later call), nodice's 112 requests alone 130 s, each schedule
#               6-8 s; paged|sdpa's 8 requests alone 32 s, each schedule 9 s.
#   tax         one forward pass timed and profiled (torch.profiler: kernel time by kind), a short
#               generate_batch profiled per backend, then tokens/s and time per decode step at
#               concurrency 32 then 64, prefill-heavy and decode-heavy mixes, each timed run stopped
#               after TAX_RUN_SECONDS (default 75); TAX_LAYERS (default 32: all). All of it took
#               about 450 s on an H100: within one call the tax gets TAX_SECONDS (default 235),
#               enough for the profile and concurrency 32. TAX_PHASES (default "forward profile
#               tax") picks the phases, TAX_EXTRA adds options (e.g. "--concurrency 32 --no-verify"). On a GPU the tax also times paged|sdpa+cuda-graphs.
# All 32 layers alone take longer than one call: ALONE_DIR keeps the requests-alone outcomes
# (`nodice bench e2e --alone-dir`); the same command again on the warm machine (or with the folder
# carried back) runs only the requests still missing, then the schedules; ALONE_SHARDS=N runs the
# requests alone in N processes side by side first (not yet measured on a GPU). E.g., call after call:
#   ONLY=invariance INV_LAYERS=32 INV_SECONDS=560 ALONE_DIR=/tmp/nodice-alone OUT=... lab/scripts/gpu_e2e.sh
# INV_EXTRA adds options to the invariance run (e.g. "--requests 24" for a short check).
# nodice's decode steps run as CUDA graphs on a GPU; TAX_EXTRA="-b nodice -b nodice-eager ..." times
# it without them too. The commit measured goes into $OUT/commit.txt (NODICE_COMMIT where the GPU
# copy of the repository has no git history).
# Needs transformers 5.17 in the image (no wheel is carried). BUDGET bounds the call (default 570 s).
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
echo "${NODICE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" > "$OUT/commit.txt"
if [ "$tiny" = 1 ]; then
  common="--preset tiny --layers 1 --requests 3 --no-verify --device ${DEVICE:-cpu}"
  inv_args="$common"
  tax_args="$common --concurrency 2"
  inv_s=300
  tax_s=300
else
  inv_args="--preset 8b --layers ${INV_LAYERS:-2} --control-requests ${CONTROL:-8} --device cuda ${INV_EXTRA:-}"
  tax_args="--preset 8b --layers ${TAX_LAYERS:-32} --device cuda --tax-timeout ${TAX_RUN_SECONDS:-75} ${TAX_EXTRA:-}"
  inv_s=${INV_SECONDS:-330}
  tax_s=${TAX_SECONDS:-235}
fi
[ -n "${ALONE_DIR:-}" ] && inv_args="$inv_args --alone-dir $ALONE_DIR"
# ALONE_SHARDS=N (with ALONE_DIR): N processes first run the requests alone side by side
# (`--alone-shard i/N`, unverified kernels: the run after them gates them and reads what they stored).
shards=""
if [ -n "${ALONE_SHARDS:-}" ] && [ -n "${ALONE_DIR:-}" ]; then
  shards="for i in \$(seq 0 $((ALONE_SHARDS - 1))); do python3 -m nodice bench e2e $inv_args --phase invariance --no-verify --alone-shard \$i/$ALONE_SHARDS --json \$RUN/shard\$i.json > \$RUN/shard\$i.log 2>&1 & done; wait;"
fi
tax_phases=""
for p in ${TAX_PHASES:-forward profile tax}; do tax_phases="$tax_phases --phase $p"; done
BUDGET=${BUDGET:-570} bench/gpu/run_many.sh \
  "invariance=$inv_s=$shards python3 -m nodice bench e2e $inv_args --phase invariance --json \$RUN/e2e.json --markdown \$RUN/e2e.md" \
  "tax=$tax_s=python3 -m nodice bench e2e $tax_args $tax_phases --no-sample --json \$RUN/e2e.json --markdown \$RUN/e2e.md"
cat "$OUT/run_many.log"
[ -n "${ALONE_DIR:-}" ] && [ -d "$ALONE_DIR" ] && cp -r "$ALONE_DIR" "$OUT/alone"
for phase in invariance tax; do
  [ -f "$OUT/$phase/e2e.md" ] && cat "$OUT/$phase/e2e.md"
  [ -f "$OUT/$phase/e2e.md" ] || grep -h '^\[' "$OUT/$phase/log" 2>/dev/null | tail -25
done
exit 0
