#!/usr/bin/env bash
# Set up (with dev tools) and run the whole test suite: lint, format, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# One thread per process: the test workers already use both cores, and Triton's interpreter
# (numpy on small blocks) runs ~3x faster without oversubscription.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# mypy (one core, about a minute and a half on a clean checkout) runs beside the tests, at the lowest
# priority: they spend about a third of their time waiting on subprocesses, hang budgets and Ray
# start-ups, and it takes the cores while they wait rather than from them. Its report is printed
# after them.
mypy_log=$(mktemp)
trap 'rm -f "$mypy_log"' EXIT
nice -n 19 .venv/bin/mypy nodice >"$mypy_log" 2>&1 &
mypy_pid=$!
status=0
# Whole modules per worker (--dist loadscope): a module's fixtures (a gated mode, a benchmark run, a
# built-in evolution) are built once, not once in each worker that takes some of its tests.
.venv/bin/python -m pytest -q -n "${NODICE_TEST_WORKERS:-2}" --dist loadscope --durations=15 "$@" || status=$?
wait "$mypy_pid" || status=1
cat "$mypy_log"
exit "$status"
