"""Coding-agent CLI presets: the real Codex CLI and the real Claude Code run `nodice evolve` end to end
through nodice's MCP server, their model scripted on loopback; aider (not installed here) is checked
for its command line and configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodice.evolution.agents import AgentError, make_agent
from nodice.evolution.agents.presets import PRESETS, LaunchSpec
from nodice.evolution.agents.rmsnorm_template import RowKnobs, render
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from tests.scripted_model import Call, Say, ScriptedMessages, ScriptedResponses

ROOT = Path(__file__).resolve().parents[1]
TOOLS_BIN = ROOT / ".tools" / "node_modules" / ".bin"
VIOLATING = (ROOT / "nodice" / "examples" / "rmsnorm" / "split_rows_small_batch.py").read_text()
FASTER = render(RowKnobs(rows_per_program=4, single_pass=True))
SPEC = LaunchSpec(
    run_root=Path("/runs/r"),
    workspace=Path("/runs/r/workspace"),
    prompt=Path("/runs/r/workspace/PROMPT.md"),
    env={"NODICE_ISLAND": "1"},
    model="m1",
    extra_args=("--extra", "x"),
)
CODEX_CONFIG = """\
model_provider = "scripted"

[model_providers.scripted]
name = "scripted model on loopback"
base_url = "{url}"
env_key = "NODICE_SCRIPTED_KEY"
wire_api = "responses"
"""


# The scripted model's turns: a batch-dependent edit the gate must reject, then a faster honest one.
TURNS: list[Call | Say] = [
    Call("status"),
    Call("write_file", {"path": "kernel.py", "content": VIOLATING}),
    Call("run_gate", {"message": "rows split over the SMs"}),
    Call("write_file", {"path": "kernel.py", "content": FASTER}),
    Call("benchmark", {"message": "4 rows per program, single pass"}),
    Call("commit", {"message": "4 rows per program, single pass"}),
    Say("Committed the faster kernel."),
]


def _evolve(agent: str, run: Path, env: dict[str, str], *extra: str) -> str:
    """``nodice evolve rmsnorm`` with the preset ``agent`` until its budget is spent; the agent's log."""
    evolve = f"evolve rmsnorm --device cpu --agent {agent} --model scripted --budget 3 --no-report"
    done = subprocess.run(
        [sys.executable, "-m", "nodice", *evolve.split(), f"--run-dir={run}", "--launch-timeout=240", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = (run / "logs" / "agent.log").read_text() if (run / "logs" / "agent.log").exists() else ""
    assert done.returncode == 0, done.stderr + done.stdout + log
    assert "budget spent" in done.stdout
    return log


def _assert_committed_by(run: Path, agent: str) -> None:
    """The rejected edit and the committed one are in the journal, the faster kernel in the lineage."""
    versions = Lineage(run).versions()
    assert [(v.version, v.agent) for v in versions] == [(0, "seed"), (1, agent)]
    assert versions[1].description == "4 rows per program, single pass"
    assert "ROWS_PER_PROGRAM" in Lineage(run).show(versions[1].sha, "workspace/kernel.py")
    attempts = Journal(run / "results.sqlite").attempts()
    assert [(a.agent, a.label, a.outcome) for a in attempts][1:] == [
        (agent, "run_gate", "bi_violation"),
        (agent, "benchmark", "committed"),
    ]


@pytest.mark.skipif(
    not (TOOLS_BIN / "codex").exists(), reason="the Codex CLI is not in .tools/ (scripts/setup.sh --dev)"
)
def test_codex_evolves_through_the_mcp_server(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"  # the test's own Codex settings: the user's are never read
    home.mkdir()
    run = tmp_path / "run"
    with ScriptedResponses(TURNS) as model:
        (home / "config.toml").write_text(CODEX_CONFIG.format(url=model.base_url))
        env = dict(os.environ)
        env |= {
            "CODEX_HOME": str(home),
            "NODICE_SCRIPTED_KEY": "unused",
            "PATH": f"{TOOLS_BIN}{os.pathsep}{env['PATH']}",
            "TRITON_INTERPRET": "1",
        }
        # The two --agent-arg flags go to Codex as they are.
        log = _evolve("codex", run, env, "--agent-arg=-c", "--agent-arg=model_reasoning_effort=none")

    # Every scripted call reached nodice's server and its answer went back to the model.
    outputs = model.tool_outputs()
    assert len(outputs) == 6, outputs
    gate = outputs["call_2"]
    assert "bi_violation" in gate and "repair" in gate and "work_partitioning" in gate, gate
    assert '"committed":true' in outputs["call_5"].replace(" ", ""), outputs["call_5"]

    _assert_committed_by(run, "codex")
    assert "mcp: nodice/run_gate" in log  # Codex's own transcript of the launch


@pytest.mark.skipif(
    not (TOOLS_BIN / "claude").exists(), reason="Claude Code is not in .tools/ (scripts/setup.sh --dev)"
)
def test_claude_code_evolves_through_the_mcp_server(tmp_path: Path) -> None:
    home = tmp_path / "claude-home"  # the test's own home and settings: the user's are never read
    home.mkdir()
    run = tmp_path / "run"
    with ScriptedMessages(TURNS) as model:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
        env |= {
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": model.base_url,
            "ANTHROPIC_API_KEY": "unused",
            # No update check, telemetry, error reports or other traffic beyond the model's endpoint.
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "PATH": f"{TOOLS_BIN}{os.pathsep}{env['PATH']}",
            "TRITON_INTERPRET": "1",
        }
        log = _evolve("claude-code", run, env)

    # Every scripted call reached nodice's server and its answer went back to the model.
    # Claude Code lists MCP tools by name until ToolSearch loads them: one search, then the six calls.
    outputs = model.tool_outputs()
    assert model.tool_searches == 1 and set(outputs) == {"toolu_search_1", *(f"toolu_{i}" for i in range(6))}
    assert "mcp__nodice__run_gate" in {t["name"] for t in model.requests[-1]["tools"]}
    gate = outputs["toolu_2"]
    assert "bi_violation" in gate and "repair" in gate and "work_partitioning" in gate, gate
    assert "committed v1" in outputs["toolu_5"], outputs["toolu_5"]

    _assert_committed_by(run, "claude-code")
    assert "Committed the faster kernel." in log  # Claude Code's own output for the launch


def test_codex_command_line() -> None:
    argv = PRESETS["codex"].argv(SPEC)
    assert argv[:2] == ["codex", "exec"] and argv[-3:] == ["--extra", "x", "-"]
    assert argv[argv.index("--cd") + 1] == "/runs/r/workspace"
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("--model") + 1] == "m1"
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert 'approval_policy="never"' in overrides
    assert f"mcp_servers.nodice.command={json.dumps(sys.executable)}" in overrides
    assert (
        'mcp_servers.nodice.args=["-m", "nodice", "mcp", "--run-dir", "/runs/r", "--agent", "codex"]'
        in overrides
    )
    assert 'mcp_servers.nodice.env={"NODICE_ISLAND" = "1"}' in overrides
    assert 'mcp_servers.nodice.default_tools_approval_mode="approve"' in overrides


def test_claude_code_command_line() -> None:
    argv = PRESETS["claude-code"].argv(SPEC)
    assert argv[:2] == ["claude", "--print"] and argv[-2:] == ["--extra", "x"]
    config = json.loads(argv[argv.index("--mcp-config") + 1])
    server = config["mcpServers"]["nodice"]
    assert server["command"] == sys.executable and server["env"] == {"NODICE_ISLAND": "1"}
    assert server["args"] == ["-m", "nodice", "mcp", "--run-dir", "/runs/r", "--agent", "claude-code"]
    assert "--strict-mcp-config" in argv
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--allowedTools") + 1] == "mcp__nodice"


def test_aider_command_line() -> None:
    argv = PRESETS["aider"].argv(SPEC)
    assert argv[0] == "aider" and argv[-3:] == ["--extra", "x", "kernel.py"]
    assert argv[argv.index("--message-file") + 1] == "/runs/r/workspace/PROMPT.md"
    assert {"--yes-always", "--no-git", "--no-auto-commits", "--auto-test"} <= set(argv)
    assert argv[argv.index("--test-cmd") + 1].startswith("nodice run commit")
    assert not PRESETS["aider"].uses_mcp


def test_a_preset_whose_cli_is_missing_is_one_line(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))  # no claude there
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodice",
            "evolve",
            "rmsnorm",
            "--agent=claude-code",
            f"--run-dir={tmp_path}/run",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "'claude', which is not on PATH" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()
    with pytest.raises(AgentError, match="--agent-arg is for the CLI presets"):
        make_agent("builtin", agent_args=["-x"])
