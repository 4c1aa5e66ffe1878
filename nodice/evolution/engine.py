"""The evolution loop: open or resume a run, let the agent work, supervise, stop on budget.

Start: lay out the run directory (seed in the workspace, first git commit),
or reopen it and reconcile the journal with git. Evaluate the seed once; if it
passes it is version 0. Then step the agent until the evaluation budget or the
time budget is spent, the agent has nothing left to try, or the user stops the
run (SIGINT/SIGTERM finish the evaluation in progress first). After every step
the engine reads the journal for new attempts — made in this process or by an
external agent's ``nodice run`` commands — updates the live view, asks the
supervisor, and rewrites ``state.json``.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from nodice.evaluation.executor import ExecutorConfig
from nodice.evolution.agents.base import MAX_IDLE_STEPS, Agent, AgentContext
from nodice.evolution.journal import Attempt, Intervention
from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.progress import Progress, ProgressState
from nodice.evolution.rundir import RunConfig, RunDir
from nodice.evolution.scores import standing_text
from nodice.evolution.session import BudgetExhausted, RunSession
from nodice.evolution.supervisor import Supervisor, SupervisorConfig, as_direction
from nodice.evolution.tools import AgentTools


@dataclass
class EvolveSummary:
    run_dir: Path
    evaluations: int
    commits: int
    first_geomean: float
    best_geomean: float
    best_version: int | None
    stop_reason: str
    unit: str = ""
    best_ratio: float | None = None
    best_limit_fraction: float | None = None

    def best_text(self) -> str:
        """``3012 GB/s (0.93× best baseline, 71% of copy bandwidth) +12.0% over v0``."""
        if self.best_version is None:
            return "no version committed"
        text = standing_text(self.best_geomean, self.unit, self.best_ratio, self.best_limit_fraction)
        if self.first_geomean > 0 and self.best_geomean > 0 and self.best_version:
            text += f" {(self.best_geomean / self.first_geomean - 1) * 100:+.1f}% over v0"
        return text


class Engine:
    def __init__(
        self,
        run: RunDir,
        config: RunConfig,
        agent: Agent,
        *,
        evaluator: Any = None,
        console: Console | None = None,
        executor: ExecutorConfig | None = None,
        islands: list[Agent] | None = None,
    ):
        self.run = run
        self.config = config
        self.agent = agent
        # More than one: each is an island on the one lineage (``agent`` is the first of them).
        self.agents = islands or [agent]
        self.island_sessions: list[RunSession] = []
        self.console = console or Console()
        self.session = RunSession(run, config, evaluator, executor)
        self.supervisor = Supervisor(
            SupervisorConfig(stagnation_window=config.stagnation_window),
            advisor=getattr(agent, "advise", None),
        )
        self.stop_reason = ""
        self._stop_requested = False
        self._last_seen = 0
        self._elapsed_before = float(run.load_state().get("elapsed_s", 0.0))
        self._session_start = time.monotonic()
        self.progress = Progress(
            ProgressState(
                config.task,
                config.agent,
                config.device,
                config.budget,
                config.time_budget_s,
                unit=config.unit or "",
            ),
            self.console,
        )
        self.session.on_evaluation_start = self.progress.evaluating

    # ---- stopping ------------------------------------------------------------------
    def elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._session_start

    def must_stop(self) -> bool:
        """A signal or the time budget: stop now."""
        if self._stop_requested:
            self.stop_reason = self.stop_reason or "stopped by signal"
            return True
        if self.config.time_budget_s is not None and self.elapsed() >= self.config.time_budget_s:
            self.stop_reason = f"time budget spent ({self.config.time_budget_s:.0f} s)"
            return True
        return False

    def should_stop(self) -> bool:
        if self.must_stop():
            return True
        left = self.session.evaluations_left()
        if left is not None and left <= 0:
            self.stop_reason = f"evaluation budget spent ({self.config.budget})"
            return True
        return False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stop_requested:
            raise KeyboardInterrupt
        self._stop_requested = True
        self.stop_reason = f"stopped by {signal.Signals(signum).name}"
        self.progress.note("stopping after the evaluation in progress (signal again to abort)")

    # ---- observing -----------------------------------------------------------------------
    def observe(self) -> None:
        """Take in attempts recorded since the last look; let the supervisor intervene."""
        journal = self.session.journal
        new = journal.attempts(since=self._last_seen)
        for a in new:
            self._last_seen = a.id
            self.progress.attempt(a, a.id)
        self._sync_progress()
        if new:
            iv = self.supervisor.check(journal.attempts(), journal.interventions())
            if iv is not None:
                with self.run.writing():
                    journal.add_intervention(iv)
                self._redirect(iv)
                self.progress.intervention(iv)
        self.save_state("running")

    def _redirect(self, iv: Intervention) -> None:
        """The supervisor's direction, for every agent (every island) from now on."""
        for session in [self.session, *self.island_sessions]:
            session.direction = iv.chosen
        for agent in self.agents:
            agent.redirect(as_direction(iv), iv.review)

    def save_state(self, status: str) -> None:
        versions = self.session.versions()
        best = versions[-1] if versions else None
        self.run.save_state(
            {
                "status": status,
                "task": self.config.task,
                "agent": self.config.agent,
                "device": self.config.device,
                "bi": self.config.bi,
                "evaluations": self.session.evaluations_done(),
                "budget": self.config.budget,
                "commits": len(versions),
                "best": {
                    "version": best.version,
                    "geomean": best.geomean,
                    "unit": best.unit,
                    "ratio_best": best.ratio_best,
                    "sha": best.sha,
                }
                if best
                else None,
                "first_geomean": versions[0].geomean if versions else 0.0,
                "rejections": self.session.journal.rejections_by_reason(),
                "direction": self.session.direction,
                "interventions": len(self.session.journal.interventions()),
                "elapsed_s": round(self.elapsed(), 1),
                "stop_reason": self.stop_reason,
                "islands": len(self.agents) if len(self.agents) > 1 else None,
                "updated": time.time(),
            }
        )

    # ---- the run ---------------------------------------------------------------------------
    def _sync_progress(self) -> None:
        versions = self.session.versions()
        self.progress.sync(
            self.session.evaluations_done(), versions, self.session.journal.rejections_by_reason()
        )

    def _replay(self) -> None:
        """Bring the live view and the agent's direction up to date with the journal."""
        attempts = self.session.journal.attempts()
        self._last_seen = attempts[-1].id if attempts else 0
        self._sync_progress()
        interventions = self.session.journal.interventions()
        if interventions:
            last = interventions[-1]
            self._redirect(last)
            self.progress.state.direction = last.chosen
            self.progress.state.interventions = len(interventions)

    def _evaluate_seed(self) -> Attempt | None:
        if self.session.journal.count() > 0 or self.should_stop():
            return None
        self.progress.note("evaluating the seed")
        return self.session.evaluate(
            agent="seed", label="seed", description="the seed kernel", commit_if_eligible=True
        )

    def execute(self) -> EvolveSummary:
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in previous:
            signal.signal(sig, self._on_signal)
        try:
            with self.run.engine_lock(), self.progress:
                for note in self.session.reconcile():
                    self.progress.note(f"reconciled: {note}")
                self._replay()
                self._loop()
                self.session.drain()  # evaluations still in flight when the loop stopped
                self.observe()
                self.save_state("finished" if not self._stop_requested else "stopped")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for agent in self.agents:
                agent.close()
            self.session.close()
        s = self.progress.state
        return EvolveSummary(
            self.run.root,
            s.evaluations,
            s.commits,
            s.first_geomean,
            s.best_geomean,
            s.best_version,
            self.stop_reason,
            s.unit,
            s.best_ratio,
            s.best_limit_fraction,
        )

    def _loop(self) -> None:
        knowledge = KnowledgeBase([Path(d) for d in self.config.knowledge_dirs])
        tools = AgentTools(self.session, knowledge, self.agent.name)
        ctx = AgentContext(
            self.session,
            tools,
            knowledge,
            self.config,
            poll=self.observe,
            should_stop=self.should_stop,
            must_stop=self.must_stop,
        )
        self._evaluate_seed()
        self.observe()
        if len(self.agents) > 1:
            from nodice.evolution.islands import run_islands

            run_islands(self, self.agents)
            return
        self.agent.start(ctx)
        idle = 0
        while not self.should_stop():
            try:
                report = self.agent.step(ctx)
            except BudgetExhausted:
                self.observe()
                continue
            self.observe()
            if report.exhausted:
                self.stop_reason = f"the {self.agent.name} agent has nothing left to try ({report.note})"
                break
            idle = 0 if report.attempts else idle + 1
            if idle >= MAX_IDLE_STEPS:
                self.stop_reason = f"the agent made no evaluation in {MAX_IDLE_STEPS} steps"
                break
