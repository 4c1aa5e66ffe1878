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
    # The agent CLIs (npm) and Chromium (apt) download beside pip's install; each is waited for below.
    CODEX_VERSION=0.171.0
    CLAUDE_CODE_VERSION=2.1.332
    npm_packages=()
    [ "$(.tools/node_modules/.bin/codex --version 2>/dev/null)" = "codex-cli $CODEX_VERSION" ] \
        || npm_packages+=("@openai/codex@$CODEX_VERSION")
    [ "$(.tools/node_modules/.bin/claude --version 2>/dev/null)" = "$CLAUDE_CODE_VERSION (Claude Code)" ] \
        || npm_packages+=("@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION")
    npm_pid=
    if [ ${#npm_packages[@]} -gt 0 ] && command -v npm >/dev/null 2>&1; then
        npm install --silent --no-audit --no-fund --prefix .tools "${npm_packages[@]}" >/dev/null 2>&1 &
        npm_pid=$!
    fi
    apt_pid=
    if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) &
        apt_pid=$!
    fi
    .venv/bin/python -m pip install -q "torch==2.13.0" -e ".[dev,openevolve,ray,flashinfer-bench,mcp,transformers,search]"
    if [ ${#npm_packages[@]} -gt 0 ] && { [ -z "$npm_pid" ] || ! wait "$npm_pid"; }; then
        echo "setup: could not install ${npm_packages[*]}; the agent presets' end-to-end tests will be skipped" >&2
    fi
    if [ -n "$apt_pid" ] && ! wait "$apt_pid"; then
        echo "setup: could not install chromium; the report test will be skipped" >&2
    fi
else
    .venv/bin/python -m pip install -q "torch==2.13.0" -e .
fi
