#!/usr/bin/env bash
# One GPU call: the BI audit of every library baseline of every task, the per-library table.
#
# Usage (from the repository root): OUT=/some/dir bench/gpu/audit_libraries.sh [TASK ...]
#   JOBS=8       audits side by side (one `nodice audit` process each, all on the one GPU)
#   JOB_S=400    seconds for one baseline: its import, JIT builds and the dynamic validation
#   TOTAL_S=430  seconds for all the audits; what has not finished by then is an error row
# Installs the wheels carried in .whl/ (and .whl-fa4/ once joined, bench/gpu/WHEELS.md) into a private
# folder, lists the baselines that load on CUDA (bench/gpu/audit_libraries.py jobs), runs
#   nodice audit --device cuda --json --task TASK --baseline NAME
# for each, longest libraries first, and gathers the rows into one report.
# About 8 minutes in all with the defaults (install, listing, audits, collection).
# Outputs in $OUT (four files): audit_libraries.json (bench/audit_table.py reads it), audit_libraries.md
# (its table), audit_libraries.log (each job's last lines), gpu.csv.
# NODICE_COMMIT=<hash> where the GPU machine's copy of the repository is not at the commit measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
source bench/gpu/site.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/gpu.csv" 2>&1 || true

work=$(mktemp -d /tmp/nodice-audit.XXXXXX)
python3 bench/gpu/audit_libraries.py jobs "$work" "$@" || exit 2
JOB_S=${JOB_S:-400}
export work JOB_S
one() {
  local index=$1 task name
  IFS=$'\t' read -r _ task name < <(grep -P "^$index\t" "$work/jobs.tsv")
  echo "start $index: $task / $name" >&2
  timeout --kill-after=10 "$JOB_S" python3 -m nodice audit --device cuda --json --task "$task" --baseline "$name" \
    >"$work/$index.json" 2>"$work/$index.err"
  local rc=$?
  echo "$rc" >"$work/$index.rc"
  echo "done $index: $task / $name: exit $rc" >&2
}
export -f one
cut -f1 "$work/jobs.tsv" | timeout --kill-after=20 "${TOTAL_S:-430}" xargs -P "${JOBS:-8}" -I{} bash -c 'one {}' \
  2>&1 | tee "$OUT/audit_libraries.log"

python3 bench/gpu/audit_libraries.py collect "$work" "$OUT/audit_libraries.json" "$JOB_S" \
  "bench/gpu/audit_libraries.sh $*" | tee -a "$OUT/audit_libraries.log"
for err in "$work"/*.err; do
  [[ -s $err ]] && { echo "== $(basename "$err" .err): $(grep -P "^$(basename "$err" .err)\t" "$work/jobs.tsv" | cut -f2,3)"; tail -5 "$err"; }
done >>"$OUT/audit_libraries.log"
python3 bench/audit_table.py "$OUT/audit_libraries.json" >"$OUT/audit_libraries.md"
status=$?
cat "$OUT/audit_libraries.md"
exit "$status"
