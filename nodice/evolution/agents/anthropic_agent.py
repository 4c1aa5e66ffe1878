"""An agent on the Anthropic Messages API with tool use."""

from __future__ import annotations

import os
from typing import Any

from nodice.evolution.agents.base import AgentError
from nodice.evolution.agents.chat import ChatAgent, Reply, ToolCall
from nodice.evolution.tools import SPECS

DEFAULT_MODEL = "claude-sonnet-4-5"


class AnthropicAgent(ChatAgent):
    name = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 8192,
        timeout_s: float = 600.0,
    ) -> None:
        super().__init__(model or DEFAULT_MODEL)
        try:
            import anthropic
        except ImportError:  # pragma: no cover - a declared dependency
            raise AgentError("the anthropic package is not installed") from None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise AgentError("no API key: set ANTHROPIC_API_KEY or pass --api-key")
        self.max_tokens = max_tokens
        self.client = anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=2)

    def complete(
        self, messages: list[dict[str, Any]], with_tools: bool = True
    ) -> tuple[Reply, dict[str, Any]]:
        request: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": messages}
        if self.system:
            request["system"] = self.system
        if with_tools:
            request["tools"] = [s.anthropic() for s in SPECS]
        response = self.client.messages.create(**request)
        text_parts: list[str] = []
        calls: list[ToolCall] = []
        content: list[dict[str, Any]] = []
        for block in response.content:
            kind = getattr(block, "type", "")
            if kind == "text":
                text_parts.append(block.text)
                content.append({"type": "text", "text": block.text})
            elif kind == "tool_use":
                calls.append(ToolCall(block.id, block.name, dict(block.input or {})))
                content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        if not content:
            content = [{"type": "text", "text": "(no answer)"}]
        return Reply("\n".join(text_parts), calls), {"role": "assistant", "content": content}

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def tool_results(self, results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        blocks = [
            {"type": "tool_result", "tool_use_id": call.id, "content": answer} for call, answer in results
        ]
        return [{"role": "user", "content": blocks}]

    def add_note(self, messages: list[dict[str, Any]], note: str) -> None:
        """Roles must alternate: the note joins the last user message rather than following it."""
        last = messages[-1] if messages else None
        if last is None or last["role"] != "user":
            messages.append(self.user_message(note))
        elif isinstance(last["content"], list):
            last["content"] = [*last["content"], {"type": "text", "text": note}]
        else:
            last["content"] = f"{last['content']}\n\n{note}"

    def close(self) -> None:
        self.client.close()
