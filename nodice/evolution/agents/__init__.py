"""Variation operators: the built-in offline operator, LLM agents, external commands and coding-agent
CLI presets."""

from __future__ import annotations

from nodice.evolution.agents.base import Agent, AgentContext, AgentError, StepReport

__all__ = ["Agent", "AgentContext", "AgentError", "StepReport", "make_agent"]

AGENT_KINDS = ("builtin", "knobs", "openai", "anthropic", "codex", "claude-code", "aider", "cmd:COMMAND")
PRESETS = ("codex", "claude-code", "aider")
# ``nodice evolve --knob NAME`` reaches the knob search as ``--knob=NAME`` among the agent's arguments
# (kept in run.json with them, so a resumed run searches the same knobs).
KNOB_FLAG = "--knob="


def make_agent(
    spec: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    rng_seed: int = 0,
    agent_args: list[str] | None = None,
    launch_timeout_s: float | None = None,
) -> Agent:
    """The agent named by ``spec``: builtin, knobs (the built-in knob search), openai, anthropic, a CLI
    preset, or cmd:COMMAND.

    ``agent_args`` go to a preset's CLI (``--knob=NAME`` ones to the knob search); ``launch_timeout_s``
    ends one launch of a command or preset.
    """
    knob_names = [a.removeprefix(KNOB_FLAG) for a in agent_args or [] if a.startswith(KNOB_FLAG)]
    if knob_names and spec != "knobs":
        raise AgentError(f"--knob is for --agent knobs, not '{spec}'")
    if agent_args and spec not in PRESETS and len(knob_names) < len(agent_args):
        raise AgentError(f"--agent-arg is for the CLI presets ({', '.join(PRESETS)}), not '{spec}'")
    if spec == "builtin":
        from nodice.evolution.agents.builtin import BuiltinAgent

        return BuiltinAgent(rng_seed=rng_seed)
    if spec == "knobs":
        from nodice.evolution.agents.knob_search import KnobSearchAgent

        return KnobSearchAgent(rng_seed=rng_seed, only=knob_names)
    if spec == "openai":
        from nodice.evolution.agents.openai_agent import OpenAIAgent

        return OpenAIAgent(model=model, base_url=base_url, api_key=api_key)
    if spec == "anthropic":
        from nodice.evolution.agents.anthropic_agent import AnthropicAgent

        return AnthropicAgent(model=model, base_url=base_url, api_key=api_key)
    if spec in PRESETS:
        from nodice.evolution.agents.presets import PresetAgent

        return PresetAgent(spec, model=model, extra_args=agent_args, launch_timeout_s=launch_timeout_s)
    if spec.startswith("cmd:"):
        from nodice.evolution.agents.command_agent import CommandAgent

        return CommandAgent(spec.removeprefix("cmd:").strip(), launch_timeout_s)
    raise AgentError(f"unknown agent '{spec}' (use one of: {', '.join(AGENT_KINDS)})")
