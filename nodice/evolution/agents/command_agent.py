"""An external coding-agent command, launched in the workspace with a prompt file.

The command (any CLI agent) edits ``kernel.py`` in place and evaluates and
commits through ``nodice run eval`` / ``nodice run commit``, which apply the
same gate and commit rule as every other agent. ``{prompt}`` in the command is
replaced by the prompt file's path; the prompt is also given on standard input
and in ``NODICE_PROMPT_FILE``. When the command exits with budget left, it is
launched again with a fresh prompt (the run's state and the supervisor's
direction); a launch that evaluates nothing twice in a row ends the run.

As one of several islands (``nodice evolve --workers N``) the command runs in island K's own
workspace with ``NODICE_ISLAND=K`` set, and each launch starts from the best version committed
by any island. Under ``--executor ray`` its ``nodice run eval`` judges on the same cluster
(``NODICE_EXECUTOR``, ``NODICE_RAY_ADDRESS``).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from nodice.evaluation.executor import ExecutorConfig
from nodice.evaluation.workers import shared_fork_server_environment
from nodice.evolution.agents.base import Agent, AgentContext, AgentError, StepReport
from nodice.evolution.prompts import command_prompt

_POLL_S = 0.5
# What a POSIX shell's exit status says when it could not run the command at all.
_SHELL_CANNOT_RUN = {126: "found but not executable", 127: "command not found"}


class CommandAgent(Agent):
    name = "cmd"
    # Its evaluations run in its own `nodice run eval` processes, not on the driver's workers.
    evaluates_in_process = False

    def __init__(self, command: str, launch_timeout_s: float | None = None) -> None:
        super().__init__()
        if not command.strip():
            raise AgentError("empty agent command (use --agent 'cmd:YOUR COMMAND')")
        self.command = command
        self.launch_timeout_s = launch_timeout_s
        self.launches = 0
        self.idle_launches = 0

    def command_line(self, ctx: AgentContext, prompt_path: Path) -> str | list[str]:
        """What one launch runs: a shell command (``{prompt}`` replaced), or an argument list."""
        return self.command.replace("{prompt}", shlex.quote(str(prompt_path)))

    def prompt(self, ctx: AgentContext, direction: str) -> str:
        return command_prompt(ctx.session, direction)

    def _launch(self, ctx: AgentContext, prompt_path: Path, log_path: Path) -> int:
        run = ctx.session.run
        command = self.command_line(ctx, prompt_path)
        env = dict(os.environ)
        # The same nodice as this process, whatever PATH the user has.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["NODICE_RUN_DIR"] = str(run.root)
        env["NODICE_PROMPT_FILE"] = str(prompt_path)
        env["NODICE_AGENT"] = self.name  # the name `nodice run` journals its attempts under
        env.update(child_environment(run.island, ctx.session.executor))
        started = time.monotonic()
        with open(prompt_path, "rb") as stdin, open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command,
                shell=isinstance(command, str),
                cwd=run.workspace,
                env=env,
                stdin=stdin,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                while proc.poll() is None:
                    overdue = (
                        self.launch_timeout_s is not None
                        and time.monotonic() - started > self.launch_timeout_s
                    )
                    if ctx.must_stop() or overdue:
                        _kill_group(proc)
                        break
                    ctx.poll()
                    time.sleep(_POLL_S)
            finally:
                if proc.poll() is None:
                    _kill_group(proc)
        return proc.returncode if proc.returncode is not None else -1

    def step(self, ctx: AgentContext) -> StepReport:
        session = ctx.session
        run = session.run
        self.launches += 1
        prompt_path = run.workspace / "PROMPT.md"
        direction = self.direction.text if self.direction else ""
        if run.island is not None:
            run.write_workspace(session.best_files())  # the others' commits are this launch's start
        prompt_path.write_text(self.prompt(ctx, direction), encoding="utf-8")
        logs = run.root / "logs"
        logs.mkdir(exist_ok=True)
        log = logs / ("agent.log" if run.island is None else f"agent-island{run.island}.log")
        before = session.own_evaluations()
        code = self._launch(ctx, prompt_path, log)
        made = session.own_evaluations() - before
        if code in _SHELL_CANNOT_RUN and not made:
            raise AgentError(
                f"the agent command could not be run ({_SHELL_CANNOT_RUN[code]}, shell exit {code}): "
                f"{self.command!r}; its output is in {log}"
            )
        self.idle_launches = 0 if made else self.idle_launches + 1
        return StepReport(
            made,
            f"launch {self.launches} exited {code} after {made} evaluation(s)",
            exhausted=self.idle_launches >= 2,
        )


def child_environment(island: int | None, executor: ExecutorConfig | None) -> dict[str, str]:
    """What tells a `nodice run` command of the agent its island and where to evaluate (and, for local
    CPU workers, the fork server to fork them from: no command imports torch for its workers)."""
    env = {"NODICE_ISLAND": str(island)} if island is not None else {}
    if executor is None or executor.kind != "ray":
        env.update(shared_fork_server_environment())
    if executor is not None and executor.kind == "ray":
        env["NODICE_EXECUTOR"] = "ray"
        # A cluster of its own would end with the command: the child joins a running one.
        env["NODICE_RAY_ADDRESS"] = executor.ray_address or os.environ.get("RAY_ADDRESS") or "auto"
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    except (ProcessLookupError, PermissionError):
        return
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        proc.wait(5)
