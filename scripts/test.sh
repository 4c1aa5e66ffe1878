#!/usr/bin/env bash
# Set up (with dev tools) and run the whole test suite: lint, format, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy nodice
.venv/bin/python -m pytest -q -n "${NODICE_TEST_WORKERS:-2}" --durations=15 "$@"
