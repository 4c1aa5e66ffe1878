"""An external coding-agent command, launched in the workspace with a prompt file.

The command (any CLI agent) edits ``kernel.py`` in place and evaluates and
commits through ``nodice run eval`` / ``nodice run commit``, which apply the
same gate and commit rule as every other agent. ``{prompt}`` in the command is
replaced by the prompt file's path; the prompt is also given on standard input
and in ``NODICE_PROMPT_FILE``. When the command exits with budget left, it is
launched again with a fresh prompt (the run's state and the supervisor's
direction); a launch that evaluates nothing twice in a row ends the run.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from nodice.evolution.agents.base import Agent, AgentContext, AgentError, StepReport
from nodice.evolution.prompts import command_prompt

_POLL_S = 0.5


class CommandAgent(Agent):
    name = "cmd"

    def __init__(self, command: str, launch_timeout_s: float | None = None) -> None:
        super().__init__()
        if not command.strip():
            raise AgentError("empty agent command (use --agent 'cmd:YOUR COMMAND')")
        self.command = command
        self.launch_timeout_s = launch_timeout_s
        self.launches = 0
        self.idle_launches = 0

    def _launch(self, ctx: AgentContext, prompt_path: Path, log_path: Path) -> int:
        run = ctx.session.run
        quoted = shlex.quote(str(prompt_path))
        command = self.command.replace("{prompt}", quoted)
        env = dict(os.environ)
        # The same nodice as this process, whatever PATH the user has.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["NODICE_RUN_DIR"] = str(run.root)
        env["NODICE_PROMPT_FILE"] = str(prompt_path)
        started = time.monotonic()
        with open(prompt_path, "rb") as stdin, open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command,
                shell=True,
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
        prompt_path.write_text(command_prompt(session, direction), encoding="utf-8")
        logs = run.root / "logs"
        logs.mkdir(exist_ok=True)
        before = session.evaluations_done()
        code = self._launch(ctx, prompt_path, logs / "agent.log")
        made = session.evaluations_done() - before
        self.idle_launches = 0 if made else self.idle_launches + 1
        return StepReport(
            made,
            f"launch {self.launches} exited {code} after {made} evaluation(s)",
            exhausted=self.idle_launches >= 2,
        )


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
