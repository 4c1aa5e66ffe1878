#!/usr/bin/env bash
# BI-aware against vanilla search on a GPU machine, for every task of the catalog: the built-in
# operator runs `nodice evolve TASK` and `nodice evolve TASK --no-bi` at the same evaluation budget,
# then `nodice compare` judges each run's best version (ALL_VERSIONS=1: every committed version)
# with the whole gate.
#
# Usage (from the repository root): OUT=/some/dir bench/gpu/compare.sh [BUDGET] [TOTAL_S]
#   BUDGET   evaluations per run (default 8). The BI run goes first; when its time budget stops it
#            short, the vanilla run gets the number of evaluations the BI run made, so both runs of
#            a task always have the same evaluation budget.
#   TOTAL_S  wall-clock seconds for the whole script (default 540, for one 600 s device call).
#            Each task gets an equal share of the time left when it starts; each of its runs gets
#            30 % of that share as its time budget (checked between evaluations) and is killed at
#            42 %; the comparison gets what is left of the share (at least 16 % of it). A killed
#            run keeps what it committed.
#            Measured on 2 CPU cores (rmsnorm, 3 evaluations): 35 s the BI run, 17 s the vanilla
#            one, 15 s the comparison; on the H200 an rmsnorm evaluation takes about 1.5 s once the
#            worker is up, the heavier tasks several times that.
# Environment: TASKS="rmsnorm gemm" (default: every task of `nodice tasks`, the cheaper ones first;
#   the attention tasks' first evaluation, with their baselines and the shape sweep, may need more
#   than an equal share of one call: give them a call of their own with TASKS), DEVICE (default cuda),
#   ALL_VERSIONS=1 to judge every committed version (slower: one gate per version),
#   NODICE_COMMIT=<hash> where the GPU machine's copy of the repository is not at the commit measured,
#   WORKLOADS="moe=qwen3-30b-a3b-decode256,qwen3-30b-a3b-prefill4k sampling=llama3-b64" to score a
#   task's runs on those workloads only (`nodice evolve --workload`; both runs alike), so that tasks
#   whose full sweep takes longer than a share still get several evaluations per run.
# Writes under $OUT as it goes, so a timeout keeps every finished task:
#   compare.log          everything the runs and comparisons printed
#   compare/<task>.json  `nodice compare --json` of the task
#   compare.jsonl        one line per task: status, budgets, evaluations made, wall times
#   compare.json         all of it with a summary over the tasks (rewritten after every task)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
BUDGET=${1:-8}
TOTAL_S=${2:-540}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT/compare"
LOG="$OUT/compare.log"
export PYTHONUNBUFFERED=1
start=$SECONDS
say() { echo "$*" | tee -a "$LOG"; }

site=${NODICE_SITE:-/tmp/nodice-site}
for dir in .whl .whl-fa4; do
  if compgen -G "$dir/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$dir"/*.whl \
      >>"$LOG" 2>&1 || say "compare.sh: installing $dir failed; continuing with what is installed"
  fi
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$site"
if ! python3 -c "import torch, triton, typer, rich" >>"$LOG" 2>&1; then
  say "compare.sh: nodice's dependencies are missing (torch, triton, typer, rich): see $LOG"
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$OUT/gpu.csv" 2>&1 || true

if [ -n "${TASKS:-}" ]; then
  read -r -a tasks <<<"$TASKS"
else
  # Cheaper tasks first, so a call that runs out of time loses the heaviest ones.
  mapfile -t tasks < <(python3 -m nodice tasks --json 2>>"$LOG" | python3 -c '
import json, sys
order = "rmsnorm add_rmsnorm layernorm gemm sampling moe gdn attention_decode attention_prefill".split()
names = [t["name"] for t in json.load(sys.stdin)]
print("\n".join(sorted(names, key=lambda n: order.index(n) if n in order else len(order))))')
fi
if [ "${#tasks[@]}" -eq 0 ]; then
  say "compare.sh: no task to run (nodice tasks failed?): see $LOG"
  exit 2
fi
commit=${NODICE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
WORKLOADS=${WORKLOADS:-} python3 - "$OUT/compare_meta.json" "$DEVICE" "$BUDGET" "$TOTAL_S" "$commit" "${tasks[@]}" <<'EOF'
import json, os, sys, time
path, device, budget, total, commit, *tasks = sys.argv[1:]
scored = dict(pair.split("=", 1) for pair in os.environ["WORKLOADS"].split() if "=" in pair)
json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": device,
           "budget_evaluations": int(budget), "total_s": int(total), "nodice_commit": commit,
           "tasks_planned": tasks,
           "scored_workloads": {task: names.split(",") for task, names in scored.items()}},
          open(path, "w"), indent=2)
EOF
say "compare.sh: ${#tasks[@]} tasks (${tasks[*]}) on $DEVICE, $BUDGET evaluations per run, ${TOTAL_S} s in all"

every=()
[ "${ALL_VERSIONS:-0}" = 1 ] && every=(--all-versions)
runs=${NODICE_COMPARE_RUNS:-$(mktemp -d /tmp/nodice-compare-XXXXXX)}
# evolve MODE TASK BUDGET SOFT_S HARD_S: one run; prints "<rc> <wall_s> <evaluations>"
evolve() {
  local mode=$1 task=$2 budget=$3 soft=$4 hard=$5 flag=() t0=$SECONDS rc n
  [ "$mode" = vanilla ] && flag=(--no-bi)
  local pair w
  for pair in ${WORKLOADS:-}; do
    if [ "${pair%%=*}" = "$task" ]; then
      IFS=, read -r -a w <<<"${pair#*=}"
      for pair in "${w[@]}"; do flag+=(--workload "$pair"); done
    fi
  done
  echo "=== $task $mode: evolve (budget $budget evaluations, $soft s; killed at $hard s)" >>"$LOG"
  timeout -k 10 "$hard" python3 -m nodice evolve "$task" --device "$DEVICE" --budget "$budget" \
    --time-budget "$soft" --run-dir "$runs/$task-$mode" --rng-seed 0 --no-report ${flag[@]+"${flag[@]}"} \
    >>"$LOG" 2>&1
  rc=$?
  n=$(python3 -c 'import sqlite3, sys
try: print(sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM evolution_attempts").fetchone()[0])
except Exception: print(0)' "$runs/$task-$mode/results.sqlite" 2>/dev/null)
  echo "$rc $((SECONDS - t0)) ${n:-0}"
}

for i in "${!tasks[@]}"; do
  task=${tasks[$i]}
  left=$((TOTAL_S - (SECONDS - start)))
  share=$((left / (${#tasks[@]} - i)))
  if [ "$share" -lt 20 ]; then
    say "$task: skipped, ${left} s left"
    echo "{\"task\": \"$task\", \"status\": \"skipped: ${left} s left\"}" >>"$OUT/compare.jsonl"
    continue
  fi
  soft=$((share * 30 / 100)) hard=$((share * 42 / 100)) task_start=$SECONDS
  read -r bi_rc bi_s bi_n < <(evolve bi "$task" "$BUDGET" "$soft" "$hard")
  matched=$BUDGET
  [ "${bi_n:-0}" -gt 0 ] && [ "$bi_n" -lt "$BUDGET" ] && matched=$bi_n
  read -r va_rc va_s va_n < <(evolve vanilla "$task" "$matched" "$soft" "$hard")
  t0=$SECONDS
  rm -f "$OUT/compare/$task.json"
  if [ "${bi_n:-0}" -eq 0 ] || [ "${va_n:-0}" -eq 0 ]; then
    # A run that made no evaluation (its first one, the seed's, did not fit its time) has nothing
    # to compare: the task is reported incomplete and left out of the summary.
    cmp_rc=-1
    status="incomplete: a run made no evaluation in its $soft s (bi $bi_n, vanilla $va_n); give the task a longer share"
  else
    judge=$((share - (t0 - task_start)))
    [ "$judge" -lt $((share * 16 / 100)) ] && judge=$((share * 16 / 100))
    echo "=== $task: compare (killed at $judge s)" >>"$LOG"
    timeout -k 10 "$judge" python3 -m nodice compare "$runs/$task-bi" "$runs/$task-vanilla" ${every[@]+"${every[@]}"} \
      --json "$OUT/compare/$task.json" >>"$LOG" 2>&1
    cmp_rc=$?
    status=ok
    [ "$cmp_rc" -ne 0 ] && status="compare failed (exit $cmp_rc$([ "$cmp_rc" -ge 124 ] && echo ', timed out'))"
  fi
  cmp_s=$((SECONDS - t0))
  echo "{\"task\": \"$task\", \"status\": \"$status\", \"time_budget_s\": $soft, \"kill_s\": $hard," \
    "\"budget\": {\"bi\": $BUDGET, \"vanilla\": $matched}," \
    "\"bi\": {\"exit\": $bi_rc, \"wall_s\": $bi_s, \"evaluations\": $bi_n}," \
    "\"vanilla\": {\"exit\": $va_rc, \"wall_s\": $va_s, \"evaluations\": $va_n}," \
    "\"compare_run\": {\"exit\": $cmp_rc, \"wall_s\": $cmp_s}}" >>"$OUT/compare.jsonl"
  say "$task: $status; bi $bi_n evaluations in $bi_s s (exit $bi_rc), vanilla $va_n in $va_s s (exit $va_rc), compare $cmp_s s"
  python3 bench/gpu/compare_collect.py "$OUT" 2>&1 | tee -a "$LOG"
done
say "compare.sh: done in $((SECONDS - start)) s"
