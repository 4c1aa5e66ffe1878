"""Ready presets for the coding-agent CLIs people run: Codex, Claude Code, aider.

``nodice evolve TASK --agent codex`` launches the real CLI as a command agent does (in the
workspace, with the prompt, relaunched while budget remains), with what each needs to work alone:
non-interactive flags, a permission scope limited to the workspace, and nodice's MCP server
(``nodice mcp``) configured for this launch only; nothing is written to the user's own settings.
A CLI without MCP (aider) gets the ``nodice run`` commands instead, as its test command.
``--agent-arg`` flags go to the CLI as they are, after the preset's own.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from nodice.evolution.agents.base import AgentContext, AgentError
from nodice.evolution.agents.command_agent import CommandAgent, child_environment
from nodice.evolution.prompts import MCP_WORKFLOW, command_prompt

# A launch longer than this is ended and the agent relaunched with a fresh prompt.
DEFAULT_LAUNCH_TIMEOUT_S = 1800.0
# What one MCP tool call may take in the CLI's eyes: an evaluation on a busy GPU can take minutes.
TOOL_TIMEOUT_S = 3600


@dataclass(frozen=True)
class LaunchSpec:
    """Where one launch happens and what it is told, in the preset's terms."""

    run_root: Path
    workspace: Path
    prompt: Path
    # Variables `nodice run` or `nodice mcp` need in the agent's processes (island, executor).
    env: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    extra_args: tuple[str, ...] = ()


class Preset(ABC):
    """One coding-agent CLI: its executable and the argument list of one non-interactive launch."""

    name: str
    executable: str
    # True: the CLI reaches the run through nodice's MCP server; False: through `nodice run` commands.
    uses_mcp: bool = True
    # What the docs name as the version the preset was checked against.
    tested: str = ""

    @abstractmethod
    def argv(self, spec: LaunchSpec) -> list[str]:
        """The command line of one launch (the prompt also comes on standard input)."""

    def mcp_command(self, spec: LaunchSpec) -> list[str]:
        """``nodice mcp`` for this run, with the interpreter running nodice now."""
        return [sys.executable, "-m", "nodice", "mcp", "--run-dir", str(spec.run_root), "--agent", self.name]


def _toml(value: object) -> str:
    """A TOML value for ``codex -c key=value``: strings and lists of them, inline tables of strings."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # JSON's string escapes are TOML basic-string escapes


class CodexPreset(Preset):
    name = "codex"
    executable = "codex"
    tested = "Codex CLI 0.171.0 (@openai/codex on npm)"

    def argv(self, spec: LaunchSpec) -> list[str]:
        command, *args = self.mcp_command(spec)
        server = {
            "command": command,
            "args": args,
            "required": True,  # no run without its tools
            "default_tools_approval_mode": "approve",  # exec mode cannot ask; the tools are the run's own
            "startup_timeout_sec": 120,
            "tool_timeout_sec": TOOL_TIMEOUT_S,
        }
        if spec.env:
            server["env"] = spec.env
        overrides = [f"mcp_servers.nodice.{key}={_toml(value)}" for key, value in server.items()]
        argv = [
            self.executable,
            "exec",
            "--cd",
            str(spec.workspace),
            "--sandbox",
            "workspace-write",  # its own edits and commands: the workspace only
            "--skip-git-repo-check",
            "--ephemeral",
            "--color",
            "never",
            "-c",
            'approval_policy="never"',
        ]
        for override in overrides:
            argv += ["-c", override]
        if spec.model:
            argv += ["--model", spec.model]
        return [*argv, *spec.extra_args, "-"]  # "-": the prompt is read from standard input


class ClaudeCodePreset(Preset):
    name = "claude-code"
    executable = "claude"
    tested = "Claude Code 2.1.332 (@anthropic-ai/claude-code on npm)"

    def argv(self, spec: LaunchSpec) -> list[str]:
        command, *args = self.mcp_command(spec)
        server: dict[str, object] = {"type": "stdio", "command": command, "args": args}
        if spec.env:
            server["env"] = spec.env
        argv = [
            self.executable,
            "--print",  # non-interactive: the prompt from standard input, then exit
            "--output-format",
            "text",
            "--mcp-config",
            json.dumps({"mcpServers": {"nodice": server}}),
            "--strict-mcp-config",  # nodice's server only, whatever the user configured
            # Edits inside the working folder (the workspace) and nodice's tools; nothing else is allowed.
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "mcp__nodice",
        ]
        if spec.model:
            argv += ["--model", spec.model]
        return [*argv, *spec.extra_args]


class AiderPreset(Preset):
    name = "aider"
    executable = "aider"
    uses_mcp = False
    tested = "command line and configuration only (aider 0.86.2's options; not installed where the tests run)"

    def argv(self, spec: LaunchSpec) -> list[str]:
        # aider has no MCP client: after each edit it runs its test command, and a failing one (a
        # rejection, or a candidate slower than the best) comes back to the model as its output.
        argv = [
            self.executable,
            "--message-file",
            str(spec.prompt),
            "--yes-always",
            "--no-git",  # the lineage's git is nodice's, never the agent's
            "--no-auto-commits",
            "--test-cmd",
            'nodice run commit -m "edit by aider"',
            "--auto-test",
            "--no-check-update",
            "--no-show-model-warnings",
            "--analytics-disable",
        ]
        if spec.model:
            argv += ["--model", spec.model]
        return [*argv, *spec.extra_args, "kernel.py"]


PRESETS: dict[str, Preset] = {p.name: p for p in (CodexPreset(), ClaudeCodePreset(), AiderPreset())}


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise AgentError(f"unknown preset '{name}' (presets: {', '.join(PRESETS)})") from None


class PresetAgent(CommandAgent):
    """A command agent whose command line, prompt and limits come from a :class:`Preset`."""

    def __init__(
        self,
        preset_name: str,
        *,
        model: str | None = None,
        extra_args: list[str] | None = None,
        launch_timeout_s: float | None = None,
    ) -> None:
        self.preset = preset(preset_name)
        if shutil.which(self.preset.executable) is None:
            raise AgentError(
                f"the {self.preset.name} preset runs '{self.preset.executable}', which is not on PATH "
                "(see docs/agents.md for how to install it)"
            )
        if self.preset.uses_mcp and importlib.util.find_spec("mcp") is None:
            raise AgentError(f"the {self.preset.name} preset needs the MCP SDK: pip install 'nodice[mcp]'")
        super().__init__(preset_name, launch_timeout_s or DEFAULT_LAUNCH_TIMEOUT_S)
        self.name = self.preset.name
        self.model = model
        self.extra_args = tuple(extra_args or ())

    def command_line(self, ctx: AgentContext, prompt_path: Path) -> list[str]:
        run = ctx.session.run
        spec = LaunchSpec(
            run_root=run.root,
            workspace=run.workspace,
            prompt=prompt_path,
            env=child_environment(run.island, ctx.session.executor),
            model=self.model,
            extra_args=self.extra_args,
        )
        return self.preset.argv(spec)

    def prompt(self, ctx: AgentContext, direction: str) -> str:
        if self.preset.uses_mcp:
            return command_prompt(ctx.session, direction, MCP_WORKFLOW)
        return command_prompt(ctx.session, direction)
