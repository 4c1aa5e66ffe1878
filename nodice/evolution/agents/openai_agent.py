"""An agent on any OpenAI-compatible chat endpoint with tool calling (hosted, vLLM, Ollama …)."""

from __future__ import annotations

import json
import os
from typing import Any

from nodice.evolution.agents.base import AgentError
from nodice.evolution.agents.chat import ChatAgent, Reply, ToolCall
from nodice.evolution.tools import SPECS

DEFAULT_MODEL = "gpt-4.1"


class OpenAIAgent(ChatAgent):
    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        super().__init__(model or DEFAULT_MODEL)
        try:
            import openai
        except ImportError:  # pragma: no cover - a declared dependency
            raise AgentError("the openai package is not installed") from None
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not base_url:
                raise AgentError(
                    "no API key: set OPENAI_API_KEY or pass --api-key (or --base-url for a local server)"
                )
            key = "EMPTY"  # local servers (vLLM, Ollama) accept any key
        self.client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=2)

    def complete(
        self, messages: list[dict[str, Any]], with_tools: bool = True
    ) -> tuple[Reply, dict[str, Any]]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": self.system}, *messages] if self.system else messages,
        }
        if with_tools:
            request["tools"] = [s.openai() for s in SPECS]
            request["tool_choice"] = "auto"
        response = self.client.chat.completions.create(**request)
        if not response.choices:
            raise AgentError("the endpoint returned no choice")
        msg = response.choices[0].message
        calls = []
        for tc in msg.tool_calls or []:
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            calls.append(ToolCall(tc.id, fn.name, fn.arguments))
        assistant: dict[str, Any] = {"role": "assistant", "content": msg.content or ""}
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
                    },
                }
                for c in calls
            ]
        return Reply(msg.content or "", calls), assistant

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def tool_results(self, results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": call.id, "content": answer} for call, answer in results]

    def add_note(self, messages: list[dict[str, Any]], note: str) -> None:
        messages.append(self.user_message(note))

    def close(self) -> None:
        self.client.close()
