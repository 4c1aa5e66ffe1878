#!/usr/bin/env bash
# One GPU call for candidates that come with a pin sweep: for each, the sweep (sweep_<name>.py,
# against the reference kernel and the task's library baselines), then the whole gate with the
# benchmark on the candidate at its committed pins. Everything is packed into one archive as it
# goes, since a device call brings back at most eight files.
#
# Usage (from the repository root):
#   OUT=/some/dir lab/candidates/measure_sweeps.sh SWEEP=CANDIDATE:TASK ...
#   e.g. moe=moe:moe gdn=gdn:gdn gemm=gemm_splitk:gemm
# The sweep script is sweep_<CANDIDATE>.py where there is one (sweep_gemm_splitk.py), else
# sweep_<SWEEP>.py (sweep_gemm.py for gemm_tiles); its results are named after the script.
#   SWEEP_SECONDS=150   time for each sweep;  CHECK_SECONDS=150   limit for each gate
# Outputs in $OUT: sweeps.log, results.tar.gz (<sweep script>.jsonl, check_<candidate>.json, the log).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1
# shellcheck source=../../bench/gpu/site.sh
source bench/gpu/site.sh
log=$OUT/sweeps.log
here=lab/candidates
pack() { cp "$log" "$OUT/r/" 2>/dev/null; tar -czf "$OUT/results.tar.gz" -C "$OUT" r; }
for spec in "$@"; do
  sweep=${spec%%=*}
  rest=${spec#*=}
  candidate=${rest%%:*}
  task=${rest##*:}
  script=sweep_$sweep
  [ -f "$here/sweep_$candidate.py" ] && script=sweep_$candidate
  # A candidate next to this script, else a bundled kernel (gdn=gdn:gdn is nodice/kernels/gdn.py).
  file=$here/$candidate.py
  [ -f "$file" ] || file=nodice/kernels/$candidate.py
  if [ ! -f "$here/$script.py" ] || [ ! -f "$file" ]; then
    echo "measure_sweeps.sh: no $here/$script.py or $here/$candidate.py (or nodice/kernels/$candidate.py)" | tee -a "$log"
    continue
  fi
  echo "== $sweep: $script ($(date -u +%H:%M:%S))" | tee -a "$log"
  (cd "$here" && timeout "$((${SWEEP_SECONDS:-150} + 60))" python3 "$script.py" \
    --out "$OUT/r/$script.jsonl" --seconds "${SWEEP_SECONDS:-150}") >>"$log" 2>&1
  echo "$sweep: $script exit status $?" | tee -a "$log"
  pack
  timeout "$((${CHECK_SECONDS:-150} + 10))" python3 -m nodice check "$file" --task "$task" \
    --device cuda --bench --json --timeout "${CHECK_SECONDS:-150}" >"$OUT/r/check_$candidate.json" 2>>"$log"
  echo "$candidate: nodice check exit status $? (0 pass, 1 rejected, 2 error, 124 timeout)" | tee -a "$log"
  pack
done
