"""A scripted stand-in for the model behind a coding-agent CLI (it stands in for the model only).

An OpenAI Responses API endpoint on 127.0.0.1 (``POST /v1/responses``, answered as server-sent
events, as Codex CLI reads them). Each request gets the next scripted turn: a call of one of
nodice's MCP tools, found by name among the tools the request offers, or a final message. Every
request body is kept, so a test can read what the CLI sent back, such as a tool's result.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Call:
    """Call the MCP server ``server``'s tool ``tool`` with ``arguments``."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    server: str = "nodice"


@dataclass(frozen=True)
class Say:
    """End the turn with a message."""

    text: str


def _item(turn: Call | Say, number: int, tools: list[dict[str, Any]]) -> dict[str, Any]:
    if isinstance(turn, Say):
        return {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{number}",
            "content": [{"type": "output_text", "text": turn.text}],
        }
    call: dict[str, Any] = {
        "type": "function_call",
        "call_id": f"call_{number}",
        "arguments": json.dumps(turn.arguments),
    }
    # Codex offers an MCP server's tools as one namespace, mcp__<server>; older releases as flat names.
    for t in tools:
        names = {f.get("name") for f in t.get("tools", [])}
        if t.get("type") == "namespace" and t.get("name") == f"mcp__{turn.server}" and turn.tool in names:
            return call | {"namespace": t["name"], "name": turn.tool}
    return call | {"name": f"mcp__{turn.server}__{turn.tool}"}


def _events(response_id: str, item: dict[str, Any]) -> bytes:
    usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    events = [
        {"type": "response.created", "response": {"id": response_id}},
        {"type": "response.output_item.done", "item": item},
        {"type": "response.completed", "response": {"id": response_id, "usage": usage}},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class ScriptedModel:
    """Serve ``turns`` in order, one per request; after the last, every request gets ``Say("done")``."""

    def __init__(self, turns: list[Call | Say]):
        self.turns = list(turns)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if not self.path.endswith("/responses"):
                    self.send_error(404)
                    return
                with model._lock:
                    number = len(model.requests)
                    model.requests.append(body)
                turn = model.turns[number] if number < len(model.turns) else Say("done")
                data = _events(f"resp_{number}", _item(turn, number, body.get("tools", [])))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def tool_outputs(self) -> dict[str, str]:
        """What the CLI sent back for each call, by call id (a tool's result as the model reads it)."""
        outputs: dict[str, str] = {}
        for body in self.requests:
            for item in body.get("input", []):
                if item.get("type") == "function_call_output":
                    out = item.get("output")
                    if isinstance(out, list):
                        out = "\n".join(str(part.get("text", "")) for part in out)
                    outputs[item["call_id"]] = str(out)
        return outputs
