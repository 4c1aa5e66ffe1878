#!/usr/bin/env bash
# Built-in evolution runs on the GPU, one per task, each seeded with a hand-written kernel; the run
# directories (git lineage, result store, report) come back as one archive.
#
# Usage (from the repository root): OUT=/some/dir bench/gpu/evolve_lineages.sh TASK=SEED_FILE [...]
#   SECONDS_PER_TASK=130   --time-budget of each run
# Outputs in $OUT: evolve.log (appended as it goes), evolve_runs.tar.gz (one folder per task,
# compiled caches left out), evolve_summary.json (per task: evaluations, commits, first and best
# geomean, wall time).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
site=${NODICE_SITE:-/tmp/nodice-site}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    || echo "evolve_lineages.sh: installing .whl failed; those baselines will be reported missing" >&2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$site"
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/nodice-jit}
runs=/tmp/nodice-evolve
mkdir -p "$runs"
log=$OUT/evolve.log
# The run folders are packed after each task and again when the script is stopped (a caller's
# time limit), so a cut run still brings its lineage back; the log is written line by line.
pack() { tar -czf "$OUT/evolve_runs.tar.gz" -C "$runs" --exclude='*cache*' --exclude='__pycache__' . 2>/dev/null; }
trap 'pack; exit 124' TERM INT
for spec in "$@"; do
  task=${spec%%=*}
  seed=${spec#*=}
  echo "== $task from $seed ($(date -u +%H:%M:%S))" | tee -a "$log"
  t0=$(date +%s)
  timeout "$((${SECONDS_PER_TASK:-130} + 90))" python3 -m nodice evolve "$task" --device cuda --seed "$seed" \
    --run-dir "$runs/$task" --time-budget "${SECONDS_PER_TASK:-130}" --rng-seed 0 2>&1 | tee -a "$log" | tail -n 40
  echo "$task: exit ${PIPESTATUS[0]} after $(($(date +%s) - t0)) s" | tee -a "$log"
  pack
done
python3 - "$runs" "$OUT/evolve_summary.json" <<'PY' 2>&1 | tee -a "$log"
import json, sqlite3, sys
from pathlib import Path
out = {}
for run in sorted(Path(sys.argv[1]).iterdir()):
    stores = list(run.rglob("*.sqlite")) + list(run.rglob("*.db"))
    entry = {"files": sorted(str(p.relative_to(run)) for p in run.iterdir())}
    for store in stores[:1]:
        con = sqlite3.connect(store)
        entry["tables"] = {t: con.execute(f"select count(*) from {t}").fetchone()[0]
                           for (t,) in con.execute("select name from sqlite_master where type='table'")}
    out[run.name] = entry
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(out, indent=1)[:3000])
PY
