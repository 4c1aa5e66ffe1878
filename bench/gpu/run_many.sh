#!/usr/bin/env bash
# Several measurements in one GPU call, each with its own time limit and output folder, packed into
# one archive after each (a device call brings back a few files, and a timeout keeps what was packed).
#
# Usage (from the repository root):
#   OUT=/some/dir bench/gpu/run_many.sh NAME=SECONDS=COMMAND [NAME=SECONDS=COMMAND ...]
#   e.g. bench/gpu/run_many.sh \
#     'persistent=200=python3 -m nodice check nodice/kernels/attention_prefill.py --task attention_prefill --device cuda --bench --json --timeout 190 > $RUN/check.json' \
#     'speed=80=python3 bench/gpu/dynamic_speed.py --device cuda --task rmsnorm --n 5 --json $RUN/dynamic_speed.json'
# Each COMMAND runs under bash from the repository root with RUN set to its own folder ($OUT/NAME,
# created empty), stdout and stderr going to $RUN/log, stopped after SECONDS (exit 124). The carried
# baseline wheels are installed once first (bench/gpu/site.sh). BUDGET (seconds, default 570) bounds
# the whole call: a measurement that would start with less than its SECONDS left is skipped.
# ONLY=name,name runs the named measurements alone. Outputs in $OUT: run_many.log (one line per measurement: exit status, seconds) and results.tar.gz
# (every measurement's folder and the log).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck source=site.sh
source bench/gpu/site.sh
start=$(date +%s)
budget=${BUDGET:-570}
log=$OUT/run_many.log
: >"$log"
# The archive is written outside $OUT and moved in (tar reading a folder it writes into warns that
# the folder changed and exits 1); exit 1 ("file changed as we read it": a measurement still
# writing) keeps the archive, anything worse keeps the previous one.
pack() {
  local tmp
  tmp=$(mktemp "${TMPDIR:-/tmp}/run_many.XXXXXX")
  tar -czf "$tmp" -C "$OUT" --exclude=./results.tar.gz . 2>/dev/null
  if [ $? -le 1 ]; then mv "$tmp" "$OUT/results.tar.gz"; else rm -f "$tmp"; fi
}
for spec in "$@"; do
  name=${spec%%=*}
  rest=${spec#*=}
  seconds=${rest%%=*}
  command=${rest#*=}
  if [[ ! $name =~ ^[A-Za-z0-9_.-]+$ ]] || [[ ! $seconds =~ ^[0-9]+$ ]] || [ "$command" = "$rest" ]; then
    echo "run_many.sh: bad measurement '$spec' (NAME=SECONDS=COMMAND)" | tee -a "$log"
    continue
  fi
  if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
    continue  # ONLY=name,name: the other measurements are left out
  fi
  left=$((budget - ($(date +%s) - start)))
  if [ "$seconds" -gt "$left" ]; then
    echo "$name: skipped ($seconds s asked, $left s left)" | tee -a "$log"
    continue
  fi
  RUN=$OUT/$name
  rm -rf "$RUN" && mkdir -p "$RUN"
  t0=$(date +%s)
  echo "== $name ($(date -u +%H:%M:%S)): $command" >>"$log"
  RUN=$RUN timeout "$seconds" bash -c "$command" >"$RUN/log" 2>&1
  status=$?
  echo "$name: exit $status after $(($(date +%s) - t0)) s" | tee -a "$log"
  pack
done
pack
