"""The OpenAI-compatible agent against a scripted chat server on loopback (real HTTP, real tool calls)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console

from nodice.evolution.agents.openai_agent import OpenAIAgent
from nodice.evolution.agents.rmsnorm_template import RowKnobs, render
from nodice.evolution.engine import Engine
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.start import EvolveOptions, prepare_run
from tests.conftest import EXAMPLES

API_KEY = "test-key-123"
WIDER_CAP_OLD = "block_h = min(triton.next_power_of_2(hidden), 1024)"
WIDER_CAP_NEW = "block_h = min(triton.next_power_of_2(hidden), 4096)"
BI_VIOLATING = (EXAMPLES / "rmsnorm" / "tile_from_batch.py").read_text()
FASTER = render(RowKnobs(rows_per_program=4, single_pass=True))

Reply = Callable[[list[dict[str, Any]]], dict[str, Any]]


def _tool_calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{name}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


def _last_tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """Contents of the tool messages that answer the latest assistant turn."""
    out: list[str] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        out.append(str(m.get("content")))
    return out[::-1]


def _script() -> list[Reply]:
    def read(_: list[dict[str, Any]]) -> dict[str, Any]:
        return _tool_calls(("read_file", {"path": "kernel.py"}))

    def rewrite(messages: list[dict[str, Any]]) -> dict[str, Any]:
        [source] = _last_tool_results(messages)
        assert "_rmsnorm_row" in source  # the agent really saw the file it asked for
        # Several rows per program and a single pass: several times faster, far beyond timing noise.
        return _tool_calls(("write_file", {"path": "kernel.py", "content": FASTER}))

    def edit(messages: list[dict[str, Any]]) -> dict[str, Any]:
        assert _last_tool_results(messages)[0].startswith("wrote kernel.py")
        return _tool_calls(("edit_file", {"old_text": WIDER_CAP_OLD, "new_text": WIDER_CAP_NEW}))

    def bench(messages: list[dict[str, Any]]) -> dict[str, Any]:
        assert _last_tool_results(messages) == ["edited kernel.py"]
        return _tool_calls(("benchmark", {}))

    def commit(messages: list[dict[str, Any]]) -> dict[str, Any]:
        [result] = _last_tool_results(messages)
        assert "gate verdict: pass" in result
        return _tool_calls(("commit", {"message": "4 rows per program, single pass, tile cap 4096"}))

    def hostile(messages: list[dict[str, Any]]) -> dict[str, Any]:
        # Two calls in one turn: overwrite the kernel with a batch-dependent tile, then commit it.
        return _tool_calls(
            ("write_file", {"path": "kernel.py", "content": BI_VIOLATING}),
            ("commit", {"message": "narrow tile for small batches"}),
        )

    def done(messages: list[dict[str, Any]]) -> dict[str, Any]:
        [_, refusal] = _last_tool_results(messages)
        assert refusal.startswith("not committed") and "bi_violation" in refusal, refusal
        return {"role": "assistant", "content": "The gate refused it; I have nothing better to try."}

    return [read, rewrite, edit, bench, commit, hostile, done]


class ScriptedChatServer:
    """An OpenAI-compatible /v1/chat/completions endpoint that plays a script of replies."""

    def __init__(self, script: list[Reply]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if (
                    self.path != "/v1/chat/completions"
                    or self.headers.get("Authorization") != f"Bearer {API_KEY}"
                ):
                    self.send_error(401 if self.path == "/v1/chat/completions" else 404)
                    return
                server.requests.append(body)
                try:
                    message = (
                        server.script.pop(0)(body["messages"])
                        if server.script
                        else {
                            "role": "assistant",
                            "content": "I have nothing more to try.",
                        }
                    )
                except AssertionError as exc:  # a script check failed: report it to the test
                    server.errors.append(f"reply {len(server.requests)}: {exc!r}")
                    message = {"role": "assistant", "content": "script check failed"}
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_agent_over_http_commits_faster_and_is_refused_a_bi_violation(tmp_path: Path) -> None:
    # One test, one run: split in several tests, xdist could make the run once per worker.
    with ScriptedChatServer(_script()) as server:
        run, config, _ = prepare_run(
            EvolveOptions(
                task="rmsnorm",
                run_dir=tmp_path / "run",
                device="cpu",
                budget=4,
                agent="openai",
                model="scripted",
            )
        )
        agent = OpenAIAgent(model="scripted", base_url=server.url, api_key=API_KEY)
        console = Console(record=True, width=200, force_terminal=False)
        Engine(run, config, agent, console=console).execute()
    root, printed = run.root, console.export_text()
    assert not server.errors, server.errors

    # Tool calls travel over HTTP and an edit that passes the gate is committed.
    first = server.requests[0]
    assert first["model"] == "scripted"
    tools = {t["function"]["name"] for t in first["tools"]}
    assert tools >= {
        "read_file",
        "edit_file",
        "run_gate",
        "benchmark",
        "commit",
        "search_knowledge",
        "list_lineage",
    }
    assert first["messages"][0]["role"] == "system" and "batch" in first["messages"][0]["content"].lower()
    versions = Lineage(root).versions()
    assert [v.version for v in versions] == [0, 1], printed
    assert versions[1].agent == "openai"
    assert versions[1].description == "4 rows per program, single pass, tile cap 4096"
    assert versions[1].geomean > versions[0].geomean > 0
    assert WIDER_CAP_NEW in Lineage(root).show(versions[1].sha, "workspace/kernel.py")

    # The batch-dependent commit is refused, and the refusal reaches the model with its diagnostics.
    attempts = Journal(root / "results.sqlite").attempts()
    assert [a.outcome for a in attempts] == ["committed", "committed", "bi_violation"]
    answers = [m["content"] for r in server.requests for m in r["messages"] if m.get("role") == "tool"]
    refusal = next(a for a in answers if a.startswith("not committed"))
    assert "bi_violation" in refusal and "batch" in refusal
    assert len(Lineage(root).versions()) == 2
    # Three replies without a tool call in a row end the run before the budget.
    assert len(server.requests) == 9 and len(attempts) == 3
