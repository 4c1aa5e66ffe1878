"""Scripted stand-ins for the model behind a coding-agent CLI (they stand in for the model only).

Two endpoints on 127.0.0.1, both stdlib HTTP servers answering with server-sent events:
:class:`ScriptedResponses`, an OpenAI Responses API (``POST /v1/responses``, as Codex CLI reads it),
and :class:`ScriptedMessages`, an Anthropic Messages API (``POST /v1/messages``, as Claude Code
reads it). Each agent request gets the next scripted turn: a call of one of nodice's MCP tools,
found by name among the tools the request offers, or a final message. Every request body is kept,
so a test can read what the CLI sent back, such as a tool's result.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


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


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: a JSON body or a stream of server-sent events."""

    body: bytes
    content_type: str = "application/json"


def _sse(events: list[dict[str, Any]]) -> Reply:
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Reply(data.encode(), "text/event-stream")


class _ScriptedEndpoint(ABC):
    """Serve ``turns`` in order, one per agent request; after the last, ``Say("done")``."""

    def __init__(self, turns: list[Call | Say]):
        self.turns = list(turns)
        self.requests: list[dict[str, Any]] = []  # every agent request's body, in order
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                reply = endpoint.answer(self.path.split("?")[0], body)
                if reply is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def do_HEAD(self) -> None:  # a reachability probe
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def next_turn(self, body: dict[str, Any]) -> tuple[int, Call | Say]:
        """Record an agent request and give it the next turn, with its number."""
        with self._lock:
            number = len(self.requests)
            self.requests.append(body)
        return number, self.turns[number] if number < len(self.turns) else Say("done")

    @abstractmethod
    def answer(self, path: str, body: dict[str, Any]) -> Reply | None:
        """The reply to ``POST path`` (None: not found)."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class ScriptedResponses(_ScriptedEndpoint):
    """An OpenAI Responses API: every ``POST …/responses`` is an agent request."""

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1"

    def answer(self, path: str, body: dict[str, Any]) -> Reply | None:
        if not path.endswith("/responses"):
            return None
        number, turn = self.next_turn(body)
        item = self._item(turn, number, body.get("tools", []))
        usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        return _sse(
            [
                {"type": "response.created", "response": {"id": f"resp_{number}"}},
                {"type": "response.output_item.done", "item": item},
                {"type": "response.completed", "response": {"id": f"resp_{number}", "usage": usage}},
            ]
        )

    @staticmethod
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


class ScriptedMessages(_ScriptedEndpoint):
    """An Anthropic Messages API. A request that offers tools is an agent request and gets the next
    turn; the CLI's side requests (a title, a summary: no tools) get a short text and
    ``…/count_tokens`` an estimate, so they never take a turn."""

    def __init__(self, turns: list[Call | Say]):
        super().__init__(turns)
        self.side_requests: list[dict[str, Any]] = []
        self.tool_searches = 0

    def answer(self, path: str, body: dict[str, Any]) -> Reply | None:
        if path.endswith("/messages/count_tokens"):
            return Reply(json.dumps({"input_tokens": len(json.dumps(body)) // 4}).encode())
        if not path.endswith("/messages"):
            return None
        if not body.get("tools"):
            with self._lock:
                self.side_requests.append(body)
            return self._reply(body, {"type": "text", "text": "nodice evolve"}, "side")
        search = self._tool_search(body)
        if search is not None:
            return self._reply(body, search, "search")
        number, turn = self.next_turn(body)
        return self._reply(body, self._block(turn, number), str(number))

    def _tool_search(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """Claude Code lists MCP tools by name only (deferred) until ToolSearch loads their schemas:
        as a model would, load the scripted calls' tools first, once per conversation."""
        offered = {t.get("name") for t in body.get("tools", [])}
        calls = {f"mcp__{t.server}__{t.tool}" for t in self.turns if isinstance(t, Call)}
        asked = [
            block
            for message in body.get("messages", [])
            if message.get("role") == "assistant" and isinstance(message.get("content"), list)
            for block in message["content"]
            if block.get("type") == "tool_use" and block.get("name") == "ToolSearch"
        ]
        if "ToolSearch" not in offered or calls <= offered or asked:
            return None
        with self._lock:
            self.tool_searches += 1
            number = self.tool_searches
        query = "select:" + ",".join(sorted(calls))
        return {
            "type": "tool_use",
            "id": f"toolu_search_{number}",
            "name": "ToolSearch",
            "input": {"query": query},
        }

    def _reply(self, body: dict[str, Any], block: dict[str, Any], number: str) -> Reply:
        message = {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        if not body.get("stream"):
            message |= {"content": [block], "stop_reason": stop}
            return Reply(json.dumps(message).encode())
        if block["type"] == "tool_use":
            start = block | {"input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = block | {"text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        return _sse(
            [
                {"type": "message_start", "message": message},
                {"type": "content_block_start", "index": 0, "content_block": start},
                {"type": "content_block_delta", "index": 0, "delta": delta},
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
                {"type": "message_stop"},
            ]
        )

    @staticmethod
    def _block(turn: Call | Say, number: int) -> dict[str, Any]:
        if isinstance(turn, Say):
            return {"type": "text", "text": turn.text}
        # Claude Code names an MCP server's tools mcp__<server>__<tool>.
        name = f"mcp__{turn.server}__{turn.tool}"
        return {"type": "tool_use", "id": f"toolu_{number}", "name": name, "input": turn.arguments}

    def tool_outputs(self) -> dict[str, str]:
        """What the CLI sent back for each call, by tool-use id (a tool's result as the model reads it)."""
        outputs: dict[str, str] = {}
        for body in self.requests:
            for message in body.get("messages", []):
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if block.get("type") == "tool_result":
                        out = block.get("content")
                        if isinstance(out, list):
                            out = "\n".join(str(part.get("text", "")) for part in out)
                        outputs[block["tool_use_id"]] = str(out)
        return outputs
