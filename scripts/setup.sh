#!/usr/bin/env bash
# Create .venv and install nodice with its dependencies (CPU PyTorch wheel).
# --dev adds the test tools, the extras the tests exercise (openevolve, ray,
# flashinfer-bench, mcp, transformers, search), the headless Chromium the report test uses and, in
# .tools/, the Codex CLI and Claude Code that the coding-agent preset tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# torch is pinned to the CPU wheel: a bare `torch` would pull a multi-GB CUDA build.
if [ "${1:-}" = "--dev" ]; then
    .venv/bin/python -m pip install -q "torch==2.13.0" -e ".[dev,openevolve,ray,flashinfer-bench,mcp,transformers,search]"
    CODEX_VERSION=0.171.0
    if [ "$(.tools/node_modules/.bin/codex --version 2>/dev/null)" != "codex-cli $CODEX_VERSION" ]; then
        if ! command -v npm >/dev/null 2>&1 \
            || ! npm install --silent --no-audit --no-fund --prefix .tools "@openai/codex@$CODEX_VERSION" >/dev/null 2>&1; then
            echo "setup: could not install the Codex CLI; the preset's end-to-end test will be skipped" >&2
        fi
    fi
    CLAUDE_CODE_VERSION=2.1.332
    if [ "$(.tools/node_modules/.bin/claude --version 2>/dev/null)" != "$CLAUDE_CODE_VERSION (Claude Code)" ]; then
        if ! command -v npm >/dev/null 2>&1 \
            || ! npm install --silent --no-audit --no-fund --prefix .tools "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >/dev/null 2>&1; then
            echo "setup: could not install Claude Code; the preset's end-to-end test will be skipped" >&2
        fi
    fi
    if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
            || echo "setup: could not install chromium; the report test will be skipped" >&2
    fi
else
    .venv/bin/python -m pip install -q "torch==2.13.0" -e .
fi
