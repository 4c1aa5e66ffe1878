"""The OpenAI-compatible agent against a scripted chat server on loopback (real HTTP, real tool calls)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from nodice.evolution.agents.openai_agent import OpenAIAgent
from nodice.evolution.engine import Engine
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.start import EvolveOptions, prepare_run
from tests.conftest import EXAMPLES

API_KEY = "test-key-123"
WIDER_CAP_OLD = "block_h = min(triton.next_power_of_2(hidden), 1024)"
WIDER_CAP_NEW = "block_h = min(triton.next_power_of_2(hidden), 4096)"
BI_VIOLATING = (EXAMPLES / "rmsnorm" / "tile_from_batch.py").read_text()

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

    def edit(messages: list[dict[str, Any]]) -> dict[str, Any]:
        [source] = _last_tool_results(messages)
        assert WIDER_CAP_OLD in source  # the agent really saw the file it asked for
        return _tool_calls(("edit_file", {"old_text": WIDER_CAP_OLD, "new_text": WIDER_CAP_NEW}))

    def bench(messages: list[dict[str, Any]]) -> dict[str, Any]:
        assert _last_tool_results(messages) == ["edited kernel.py"]
        return _tool_calls(("benchmark", {}))

    def commit(messages: list[dict[str, Any]]) -> dict[str, Any]:
        [result] = _last_tool_results(messages)
        assert "gate verdict: pass" in result
        return _tool_calls(("commit", {"message": "tile cap 4096: one loop trip per row"}))

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

    return [read, edit, bench, commit, hostile, done]


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


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ScriptedChatServer, str]]:
    root = tmp_path_factory.mktemp("openai") / "run"
    with ScriptedChatServer(_script()) as server:
        run, config, _ = prepare_run(
            EvolveOptions(
                task="rmsnorm", run_dir=root, device="cpu", budget=4, agent="openai", model="scripted"
            )
        )
        agent = OpenAIAgent(model="scripted", base_url=server.url, api_key=API_KEY)
        console = Console(record=True, width=200, force_terminal=False)
        Engine(run, config, agent, console=console).execute()
        yield run.root, server, console.export_text()


def test_tool_calls_travel_over_http_and_commit_a_faster_version(scripted_run) -> None:  # type: ignore[no-untyped-def]
    root, server, printed = scripted_run
    assert not server.errors, server.errors
    first = server.requests[0]
    assert first["model"] == "scripted"
    assert {t["function"]["name"] for t in first["tools"]} >= {
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
    assert versions[1].agent == "openai" and versions[1].description == "tile cap 4096: one loop trip per row"
    assert versions[1].geomean >= versions[0].geomean > 0
    committed = Lineage(root).show(versions[1].sha, "workspace/kernel.py")
    assert WIDER_CAP_NEW in committed


def test_a_bi_violating_commit_from_the_llm_is_refused(scripted_run) -> None:  # type: ignore[no-untyped-def]
    root, server, _ = scripted_run
    attempts = Journal(root / "results.sqlite").attempts()
    assert [a.outcome for a in attempts] == ["committed", "committed", "bi_violation"]
    # The refusal went back to the model as the commit tool's answer, with the diagnostics.
    answers = [m["content"] for r in server.requests for m in r["messages"] if m.get("role") == "tool"]
    refusal = next(a for a in answers if a.startswith("not committed"))
    assert "bi_violation" in refusal and "batch" in refusal
    assert len(Lineage(root).versions()) == 2
    # Three replies without a tool call in a row end the run before the budget.
    assert len(server.requests) == 8 and len(attempts) == 3
