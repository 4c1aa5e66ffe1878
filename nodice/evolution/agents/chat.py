"""Shared loop of the LLM agents: one model turn per step, tool calls executed, history kept short.

Providers (OpenAI-compatible, Anthropic) differ only in how a request is built
and a reply is read; both implement :meth:`ChatAgent.complete`, which returns a
:class:`Reply` in a neutral form, and the message formats for tool results.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

from nodice.evolution.agents.base import Agent, AgentContext, AgentError, StepReport
from nodice.evolution.prompts import opening_message, run_summary, system_prompt

# Conversation kept within about this many characters; older turns are dropped whole.
_HISTORY_CHARS = 120_000
_TOOL_RESULT_CHARS = 12_000
# Replies in a row without a tool call after which the agent is taken to have nothing left to try.
_MAX_QUIET_REPLIES = 3


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any


@dataclass
class Reply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)


class ChatAgent(Agent):
    """An LLM with the run's tools. Subclasses speak one provider's API."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model
        self.system = ""
        self.opening: list[dict[str, Any]] = []
        # Each turn is a list of provider messages that must stay together (a call and its results).
        self.turns: list[list[dict[str, Any]]] = []
        self.pending_note = ""
        self.quiet_replies = 0

    # ---- provider hooks --------------------------------------------------------------
    @abstractmethod
    def complete(
        self, messages: list[dict[str, Any]], with_tools: bool = True
    ) -> tuple[Reply, dict[str, Any]]:
        """One model call: the neutral reply and the assistant message to keep in the history."""

    @abstractmethod
    def user_message(self, text: str) -> dict[str, Any]: ...

    @abstractmethod
    def tool_results(self, results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        """Messages carrying the tools' answers."""

    @abstractmethod
    def add_note(self, messages: list[dict[str, Any]], note: str) -> None:
        """Put a note from the run after the last message (merged into it where the API demands)."""

    # ---- the loop -------------------------------------------------------------------------
    def start(self, ctx: AgentContext) -> None:
        self.system = system_prompt(ctx.session)
        self.opening = [self.user_message(opening_message(ctx.session))]
        self.turns = []

    def messages(self) -> list[dict[str, Any]]:
        while self.turns and sum(len(str(m)) for t in self.turns for m in t) > _HISTORY_CHARS:
            self.turns.pop(0)
        return self.opening + [m for t in self.turns for m in t]

    def step(self, ctx: AgentContext) -> StepReport:
        before = ctx.session.own_evaluations()
        if self.pending_note:
            # The supervisor's word reaches the model before its next reply.
            self.add_note(self.turns[-1] if self.turns else self.opening, self.pending_note)
            self.pending_note = ""
        try:
            reply, assistant = self.complete(self.messages())
        except AgentError:
            raise
        except Exception as exc:  # the SDKs raise many types; one line is what the user needs
            raise AgentError(f"{type(self).__name__} request failed: {type(exc).__name__}: {exc}") from None
        turn = [assistant]
        if reply.tool_calls:
            results = []
            for call in reply.tool_calls:
                answer = ctx.tools.call(call.name, call.arguments)
                if len(answer) > _TOOL_RESULT_CHARS:
                    answer = answer[:_TOOL_RESULT_CHARS] + "\n… (truncated)"
                results.append((call, answer))
            turn.extend(self.tool_results(results))
        else:
            left = ctx.session.evaluations_left()
            budget = f" ({left} evaluations left)" if left is not None else ""
            nudge = (
                f"Keep going{budget}: edit, benchmark, commit what is eligible.\n{run_summary(ctx.session)}"
            )
            turn.append(self.user_message(nudge))
        self.turns.append(turn)
        made = ctx.session.own_evaluations() - before
        names = ", ".join(c.name for c in reply.tool_calls) or "no tool call"
        self.quiet_replies = 0 if reply.tool_calls else self.quiet_replies + 1
        exhausted = self.quiet_replies >= _MAX_QUIET_REPLIES
        return StepReport(made, f"{self.model}: {names}", exhausted=exhausted)

    def redirect(self, direction: Any, review: str) -> None:
        super().redirect(direction, review)
        self.pending_note = f"Supervisor: {review}\nNew direction: {direction.text}"

    def advise(self, prompt: str) -> str:
        """A plain answer without tools (the supervisor's review)."""
        reply, _ = self.complete([self.user_message(prompt)], with_tools=False)
        return reply.text
