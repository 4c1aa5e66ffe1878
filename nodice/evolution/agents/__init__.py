"""Variation operators: the built-in offline operator, LLM agents and external commands."""

from __future__ import annotations

from nodice.evolution.agents.base import Agent, AgentContext, AgentError, StepReport

__all__ = ["Agent", "AgentContext", "AgentError", "StepReport", "make_agent"]

AGENT_KINDS = ("builtin", "openai", "anthropic", "cmd:COMMAND")


def make_agent(
    spec: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    rng_seed: int = 0,
) -> Agent:
    """The agent named by ``spec``: builtin, openai, anthropic, or cmd:COMMAND."""
    if spec == "builtin":
        from nodice.evolution.agents.builtin import BuiltinAgent

        return BuiltinAgent(rng_seed=rng_seed)
    if spec == "openai":
        from nodice.evolution.agents.openai_agent import OpenAIAgent

        return OpenAIAgent(model=model, base_url=base_url, api_key=api_key)
    if spec == "anthropic":
        from nodice.evolution.agents.anthropic_agent import AnthropicAgent

        return AnthropicAgent(model=model, base_url=base_url, api_key=api_key)
    if spec.startswith("cmd:"):
        from nodice.evolution.agents.command_agent import CommandAgent

        return CommandAgent(spec.removeprefix("cmd:").strip())
    raise AgentError(f"unknown agent '{spec}' (use one of: {', '.join(AGENT_KINDS)})")
