#!/usr/bin/env bash
# One GPU call for the persistent norm candidates: the sweep against the bundled kernels and the
# libraries, then the whole gate with the benchmark on each candidate at its committed pins.
#
# Usage (from the repository root): OUT=/some/dir lab/candidates/measure_norms.sh
#   SWEEP_SECONDS=200  time for sweep_norms.py
# Outputs in $OUT: norms.log, sweep_norms.jsonl, check_<candidate>.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
site=${NODICE_SITE:-/tmp/nodice-site}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    || echo "measure_norms.sh: installing .whl failed; those baselines will be reported missing" >&2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$site"
log=$OUT/norms.log
here=lab/candidates
timeout "$((${SWEEP_SECONDS:-200} + 60))" python3 "$here/sweep_norms.py" --out "$OUT/sweep_norms.jsonl" \
  --seconds "${SWEEP_SECONDS:-200}" 2>&1 | tee -a "$log"
echo "sweep exit status ${PIPESTATUS[0]}" | tee -a "$log"
for spec in rmsnorm_persistent:rmsnorm add_rmsnorm_persistent:add_rmsnorm; do
  name=${spec%%:*}
  task=${spec##*:}
  timeout 150 python3 -m nodice check "$here/$name.py" --task "$task" --device cuda --bench --json \
    --timeout 140 >"$OUT/check_$name.json" 2>>"$log"
  echo "$name: nodice check exit status $? (0 pass, 1 rejected, 2 error, 124 timeout)" | tee -a "$log"
done
