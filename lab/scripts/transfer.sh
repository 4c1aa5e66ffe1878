#!/usr/bin/env bash
# The MHA → GQA transfer, timed (as AVO timed theirs): `nodice evolve attention_prefill` on the MHA
# workloads from SEED, then a second run seeded with its best version on the GQA workloads; the two
# run directories and lab/scripts/transfer.py's summary come back as one archive.
#
# Usage (from the repository root): OUT=/some/dir lab/scripts/transfer.sh
#   SEED=nodice/kernels/attention_prefill.py   the first phase's seed
#   A_SECONDS=200  B_SECONDS=240                --time-budget of each phase
#   A_WORKLOADS='mha16-*'  B_WORKLOADS='gqa*'   the workload patterns of each phase (--workload)
#   DEVICE=cuda                                  (cpu, with rmsnorm-sized budgets, for a dry run)
#   TASK=attention_prefill
# Outputs in $OUT: results.tar.gz holding transfer.log, transfer.json (per phase: evaluations,
# commits, seed and best geomean and ratio to the fastest baseline, seconds to each version; the
# seconds phase B took to reach phase A's ratio) and both run directories (no compiled caches).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
[ -f bench/gpu/site.sh ] && source bench/gpu/site.sh
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
TASK=${TASK:-attention_prefill}
DEVICE=${DEVICE:-cuda}
runs=${RUNS:-/tmp/nodice-transfer}
rm -rf "$runs" && mkdir -p "$runs"
log=$OUT/transfer.log
pack() {
  cp "$log" "$runs/" 2>/dev/null
  [ -f "$OUT/transfer.json" ] && cp "$OUT/transfer.json" "$runs/"
  tar -czf "$OUT/results.tar.gz" -C "$runs" --exclude='*cache*' --exclude='__pycache__' --exclude='scratch' --exclude='hooks' --exclude='.lock' .
}
run_phase() {  # name, seed, workloads, seconds
  echo "== $1: $TASK from $2 on $3 for $4 s ($(date -u +%H:%M:%S))" | tee -a "$log"
  timeout "$(($4 + 120))" python3 -m nodice evolve "$TASK" --device "$DEVICE" --seed "$2" --workload "$3" \
    --run-dir "$runs/$1" --time-budget "$4" --rng-seed 0 --no-report 2>&1 | tail -n 30 | tee -a "$log"
  echo "$1: exit ${PIPESTATUS[0]}" | tee -a "$log"
}
run_phase a "${SEED:-nodice/kernels/attention_prefill.py}" "${A_WORKLOADS:-mha16-*}" "${A_SECONDS:-200}"
pack
python3 lab/scripts/transfer.py best "$runs/a" "$runs/a_best.py" 2>&1 | tee -a "$log"
run_phase b "$runs/a_best.py" "${B_WORKLOADS:-gqa*}" "${B_SECONDS:-240}"
python3 lab/scripts/transfer.py summary "$runs/a" "$runs/b" "$OUT/transfer.json" 2>&1 | tee -a "$log"
pack
