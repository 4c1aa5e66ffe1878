"""The Anthropic agent's tool use against a scripted Messages endpoint on loopback (real HTTP)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from nodice.evolution.agents.anthropic_agent import AnthropicAgent
from nodice.evolution.agents.base import AgentContext
from nodice.evolution.directions import CATALOG
from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.session import RunSession
from nodice.evolution.start import EvolveOptions, prepare_run
from nodice.evolution.tools import AgentTools

API_KEY = "anthropic-test-key"


def _tool_use(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "Let me look."}]
    blocks += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a} for i, (n, a) in enumerate(calls)
    ]
    return blocks


def test_anthropic_tool_use_round_trip(tmp_path: Path) -> None:
    replies = [
        _tool_use(("read_file", {"path": "kernel.py"}), ("search_knowledge", {"query": "rows per program"})),
        _tool_use(("list_lineage", {})),
        [{"type": "text", "text": "DIRECTION: tiling\nWiden the tile cap first."}],
    ]
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            # The key travels as x-api-key or, in newer SDKs, as a bearer token.
            keys = {
                self.headers.get("x-api-key"),
                self.headers.get("Authorization", "").removeprefix("Bearer "),
            }
            if self.path != "/v1/messages" or API_KEY not in keys:
                self.send_error(401)
                return
            requests.append(body)
            content = replies.pop(0)
            payload = {
                "id": f"msg_{len(requests)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 10},
            }
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    run, config, _ = prepare_run(EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu"))
    session = RunSession(run, config)
    try:
        kb = KnowledgeBase()
        agent = AnthropicAgent(
            model="scripted", base_url=f"http://127.0.0.1:{httpd.server_address[1]}", api_key=API_KEY
        )
        ctx = AgentContext(session, AgentTools(session, kb, agent.name), kb, config)
        agent.start(ctx)
        first = agent.step(ctx)
        agent.redirect(CATALOG["structure"], "stagnation: no gain in 6 evaluations")
        second = agent.step(ctx)
        advice = agent.advise("Pick a direction.")
        agent.close()
    finally:
        session.close()
        httpd.shutdown()
        httpd.server_close()

    assert first.attempts == second.attempts == 0 and "read_file" in first.note
    assert {t["name"] for t in requests[0]["tools"]} >= {"read_file", "benchmark", "commit"}
    assert "batch" in requests[0]["system"].lower()
    # The second request carries both tool results of the first turn, then the supervisor's note.
    results = requests[1]["messages"][-1]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert "_rmsnorm_row" in results[0]["content"] and "rows" in results[1]["content"].lower()
    assert "New direction" in results[2]["text"]
    roles = [m["role"] for m in requests[1]["messages"]]
    assert roles == ["user", "assistant", "user"]  # strict alternation, as the API demands
    assert "tools" not in requests[2] and advice.startswith("DIRECTION: tiling")
