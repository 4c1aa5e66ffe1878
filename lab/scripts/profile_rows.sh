#!/usr/bin/env bash
# Nsight Compute counters for the report rows that miss their targets, the bundled kernel and its
# library baseline side by side (lab/scripts/profile_rows.py profiles one call of one case).
#
# Usage (from the repository root, on a GPU machine whose runtime lets ncu read the counters):
#   OUT=/some/dir lab/scripts/profile_rows.sh [TASK:WORKLOAD:IMPL[:SECONDS] ...]
# With no case named, the default list below. IMPL is `nodice`, a candidate file (its path from the
# repository root, ending in .py) or a substring of a baseline's name.
# SECONDS_PER_CASE (default 60) stops one case, SECONDS after a case overrides it for that case (a
# library whose first call compiles, FlashInfer's decode or fla's chunked kernel, needs more than
# 40 s); BUDGET (default 270) skips cases that would start with less than their seconds left.
# SECTIONS (default "SpeedOfLight LaunchStats Occupancy") names ncu's sections to collect, e.g.
# add MemoryWorkloadAnalysis for where the bytes go. Writes $OUT/<task>__<workload>__<impl>.csv (ncu's details
# page), $OUT/profile_rows.log, and $OUT/profiles.json (the summary, rewritten after every case).
# A device call brings back a few files only: run it under bench/gpu/run_many.sh, which packs them
# into one archive (`bench/gpu/run_many.sh 'prof=280=OUT=$RUN lab/scripts/profile_rows.sh'`).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
# shellcheck source=../../bench/gpu/site.sh
source bench/gpu/site.sh
per=${SECONDS_PER_CASE:-60}
read -r -a sections <<<"${SECTIONS:-SpeedOfLight LaunchStats Occupancy}"
section_args=()
for s in "${sections[@]}"; do section_args+=(--section "$s"); done
budget=${BUDGET:-270}
log=$OUT/profile_rows.log
start=$(date +%s)
if [ "$#" -gt 0 ]; then
  cases=("$@")
else
  cases=(
    "gemm:qwen3-32b-down-decode-1:nodice" "gemm:qwen3-32b-down-decode-1:cuBLAS"
    "gemm:qwen3-32b-down-mixed-512:nodice" "gemm:qwen3-32b-down-mixed-512:cuBLAS"
    "rmsnorm:llama3-8b-prefill:nodice" "rmsnorm:llama3-8b-prefill:Liger"
    "attention_decode:qwen3-30b-a3b-b8-kv8k:nodice" "attention_decode:qwen3-30b-a3b-b8-kv8k:fixed split"
    "gdn:qwen3-next-qk-heads-prefill-8k:nodice" "gdn:qwen3-next-qk-heads-prefill-8k:fla"
    "add_rmsnorm:llama3-8b-prefill:nodice" "add_rmsnorm:llama3-8b-prefill:Liger"
  )
fi
ncu --version >>"$log" 2>&1 || { echo "profile_rows.sh: ncu is not on the PATH" | tee -a "$log"; exit 2; }
for c in "${cases[@]}"; do
  IFS=: read -r task workload impl secs <<<"$c"
  secs=${secs:-$per}
  if [[ ! $secs =~ ^[0-9]+$ ]]; then
    echo "== $c: skipped (seconds '$secs' is not a whole number)" | tee -a "$log"
    continue
  fi
  left=$((budget - ($(date +%s) - start)))
  if [ "$left" -lt "$secs" ]; then
    echo "== $c: skipped ($left s left)" | tee -a "$log"
    continue
  fi
  name="${task}__${workload}__$(echo "$impl" | tr -c 'A-Za-z0-9\n' '_')"
  echo "== $c ($(date +%T))" | tee -a "$log"
  t0=$(date +%s)
  timeout "$secs" ncu --clock-control none --profile-from-start off "${section_args[@]}" \
    --csv --page details --log-file "$OUT/$name.csv" \
    python3 lab/scripts/profile_rows.py --task "$task" --workload "$workload" --impl "$impl" >>"$log" 2>&1
  echo "$c: exit $? after $(($(date +%s) - t0)) s" | tee -a "$log"
  python3 lab/scripts/profile_rows.py --summarize "$OUT" --json "$OUT/profiles.json" >"$OUT/summary.txt" 2>&1
done
cat "$OUT/summary.txt" 2>/dev/null | tee -a "$log"
