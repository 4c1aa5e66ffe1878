#!/usr/bin/env bash
# Set up (with dev tools) and run the whole test suite: lint, format, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy nodice
# One thread per process: the test workers already use both cores, and Triton's interpreter
# (numpy on small blocks) runs ~3x faster without oversubscription.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
.venv/bin/python -m pytest -q -n "${NODICE_TEST_WORKERS:-2}" --durations=15 "$@"
