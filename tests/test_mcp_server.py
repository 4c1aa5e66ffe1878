"""`nodice mcp` driven by the MCP SDK's own client: over stdio (the server launched as a subprocess, as
coding agents launch it) and over streamable HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="nodice mcp needs the MCP SDK: pip install 'nodice[mcp]'")

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from nodice.evolution.agents.rmsnorm_template import RowKnobs, render
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.start import EvolveOptions, prepare_run
from tests.conftest import run_cli

EXAMPLES = Path(__file__).resolve().parents[1] / "nodice" / "examples" / "rmsnorm"
# A split count from the batch size: the static stage names the mechanism and the repair.
VIOLATING = (EXAMPLES / "split_rows_small_batch.py").read_text()
# Several times faster than the seed under the interpreter, far beyond timing noise.
FASTER = render(RowKnobs(rows_per_program=4, single_pass=True))
TOOLS = {
    "task_info",
    "status",
    "run_gate",
    "benchmark",
    "commit",
    "profile",
    "list_lineage",
    "show_version",
    "search_knowledge",
    "list_files",
    "read_file",
    "write_file",
    "edit_file",
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TRITON_INTERPRET", "1")
    return env


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    run, _, _ = prepare_run(EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu", budget=4))
    return run.root


def test_stdio_gate_diagnostics_and_the_commit_rule(run_dir: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "nodice", "mcp", "--run-dir", str(run_dir), "--agent", "sdk-client"],
        env=_env(),
    )
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with Client(params) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            seen["tools"] = listed
            call = client.call_tool
            seen["write"] = await call("write_file", {"path": "kernel.py", "content": VIOLATING})
            seen["gate"] = await call("run_gate", {"message": "split rows over the SMs"})
            seen["refused"] = await call("commit", {"message": "split rows"})
            seen["escape"] = await call("write_file", {"path": "../run.json", "content": "{}"})
            await call("write_file", {"path": "kernel.py", "content": FASTER})
            seen["commit"] = await call("commit", {"message": "4 rows per program, single pass"})
            seen["lineage"] = await call("list_lineage", {})
            seen["diff"] = await call("show_version", {"version": 1, "diff": True})
            seen["status"] = await call("status", {})

    anyio.run(session)

    tools = seen["tools"]
    assert set(tools) == TOOLS
    gate_schema = tools["run_gate"].output_schema or {}
    assert {"verdict", "findings", "mismatch", "summary"} <= set(gate_schema.get("properties", {}))
    assert tools["commit"].input_schema["required"] == ["message"]
    assert tools["status"].annotations is not None and tools["status"].annotations.read_only_hint

    gate = seen["gate"].structured_content
    assert not seen["gate"].is_error and gate["verdict"] == "bi_violation"
    finding = gate["findings"][0]
    assert finding["mechanism"] in ("reduction_order", "work_partitioning") and finding["repair"]
    assert finding["path"] and finding["file"] == "kernel.py"
    assert "bi_violation" in _text(seen["gate"]) and "repair:" in _text(seen["gate"])

    refused = seen["refused"].structured_content
    assert refused["committed"] is False and refused["summary"].startswith("not committed: refused")
    assert refused["evaluation"]["verdict"] == "bi_violation"
    assert seen["escape"].is_error and "outside the workspace" in _text(seen["escape"])
    assert json.loads((run_dir / "run.json").read_text())["task"] == "rmsnorm"

    commit = seen["commit"].structured_content
    assert commit["committed"] is True and commit["version"] == 0, commit["summary"]
    assert commit["evaluation"]["verdict"] == "pass" and commit["evaluation"]["geomean"] > 0
    versions = Lineage(run_dir).versions()
    assert [v.description for v in versions] == ["4 rows per program, single pass"]
    assert versions[0].agent == "sdk-client"
    assert [v["version"] for v in seen["lineage"].structured_content["versions"]] == [0]
    assert seen["diff"].is_error  # no v1
    status = seen["status"].structured_content
    assert status["evaluations"] == 2 and status["evaluations_left"] == 2
    assert status["best"]["version"] == 0 and status["rejections"] == {"bi_violation": 1}

    # Journaled as `nodice run` journals: one attempt per evaluation, under the agent's name; the
    # refused commit judged nothing again.
    attempts = Journal(run_dir / "results.sqlite").attempts()
    assert [(a.agent, a.label, a.outcome) for a in attempts] == [
        ("sdk-client", "run_gate", "bi_violation"),
        ("sdk-client", "commit", "committed"),
    ]
    assert attempts[0].description == "split rows over the SMs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http(run_dir: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "nodice", "mcp", f"--run-dir={run_dir}", "--transport=http", f"--port={port}"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            seen["status"] = await client.call_tool("status", {})
            seen["task"] = await client.call_tool("task_info", {})

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr
                time.sleep(0.2)
        anyio.run(session)
    finally:
        server.terminate()
        server.wait(10)
    assert seen["status"].structured_content["evaluations"] == 0
    assert "rmsnorm" in _text(seen["task"]) and "GB/s" in _text(seen["task"])


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--run-dir", "{missing}"], "is not a nodice run"),
        (["--run-dir", "{run}", "--transport", "carrier-pigeon"], "unknown transport 'carrier-pigeon'"),
        (["--run-dir", "{run}", "--transport", "http", "--port", "70000"], "less than or equal to 65535"),
        (["--run-dir", "{run}", "--transport", "http", "--port", "{busy}"], "Address already in use"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    with socket.socket() as busy:  # a port another server holds
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        filled = [a.format(missing=tmp_path / "nope", run=tmp_path, busy=busy.getsockname()[1]) for a in args]
        done = run_cli("mcp", *filled, timeout=60)
    assert done.returncode == 2 and line in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
