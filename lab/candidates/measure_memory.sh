#!/usr/bin/env bash
# One GPU call for the memory-bound candidates (norms, decode) and sampling: a sweep of their pins,
# then the whole gate with the benchmark on each, against the library baselines carried in .whl/.
#
# Usage (from anywhere): OUT=/some/dir lab/candidates/measure_memory.sh
#   SWEEP_SECONDS=200  time for sweep_memory.py;  BUDGET=540  no gate starts after this many seconds
# Outputs in $OUT: measure.log (appended as it goes), sweep_memory.jsonl, check_<name>.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
site=${NODICE_SITE:-/tmp/nodice-site}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    || echo "measure_memory.sh: installing .whl failed; those baselines will be reported missing" >&2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$site"
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/nodice-jit}
here=lab/candidates
log=$OUT/measure.log
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((BUDGET - $(elapsed))); }
step() { echo "[$(elapsed)s] $*" | tee -a "$log"; }
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" \
  2>&1 | tee -a "$log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$log"

step "sweep of the pins"
timeout "$((${SWEEP_SECONDS:-200} + 60))" python3 "$here/sweep_memory.py" --out "$OUT/sweep_memory.jsonl" \
  --seconds "${SWEEP_SECONDS:-200}" 2>&1 | tee -a "$log"
step "sweep exit status ${PIPESTATUS[0]}"

for spec in ${CANDIDATES:-attention_decode_two_launch:attention_decode rmsnorm_row:rmsnorm add_rmsnorm_row:add_rmsnorm \
  layernorm_row:layernorm sampling_split:sampling}; do
  name=${spec%%:*}
  task=${spec##*:}
  if (($(left) < 40)); then
    step "$name: $(left)s left of the budget, no gate run"
    continue
  fi
  step "gate + benchmark: $name ($task)"
  limit=$(($(left) < 150 ? $(left) : 150))
  timeout "$limit" python3 -m nodice check "$here/$name.py" --task "$task" --device cuda --bench --json \
    --timeout "$((limit - 5))" >"$OUT/check_$name.json" 2>>"$log"
  step "$name: nodice check exit status $? (0 pass, 1 rejected, 2 error, 124 timeout)"
  python3 - "$OUT/check_$name.json" <<'PY' 2>&1 | tee -a "$log"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no JSON: {exc}")
print("verdict", d.get("verdict"), {k: v.get("verdict") for k, v in (d.get("stages") or {}).items()},
      "geomean", d.get("geomean"), d.get("reason") or d.get("error") or "")
for w in d.get("scores") or []:
    base = {k: (round(b.get("throughput") or 0, 1), b.get("bi")) for k, b in (w.get("baselines") or {}).items()}
    print(" ", w["workload"], round(w.get("throughput") or 0, 1), w.get("ratio_best"), base)
PY
done
step "done"
