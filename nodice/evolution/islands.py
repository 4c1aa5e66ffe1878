"""Islands: N agents (LLM or external commands) searching side by side on one lineage.

Each island is one agent loop in a thread of the driver, with its own conversation (or command
launches), its own workspace (``islands/K``) and its own view of the run (:class:`RunSession`
on a :class:`RunDir` of island K). What they share is what makes it one search:

- the lineage: every commit goes through the one commit rule under the run's write lock, so git
  stays one linear history and a candidate slower than a commit made a moment earlier by another
  island is recorded as ``slower``;
- what they read: the lineage, the best version and the recent attempts are read from git and the
  store at every prompt and tool call, so each island sees the others' commits;
- the budget: an evaluation is admitted only while the budget, counting every evaluation in flight
  (in this process or in a ``nodice run eval`` of a command agent), has room;
- the evaluations: LLM islands judge through the driver's executor (its N workers, local or on
  Ray); a command agent's ``nodice run eval`` judges through the same executor kind in its own
  process (one slot of the same Ray cluster under ``--executor ray``).

The engine's thread keeps watching the journal (live view, supervisor, ``state.json``); a
supervisor's redirection reaches every island. An island whose agent fails stops the others.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.evaluation.executor import ExecutorConfig
from nodice.evolution.agents.base import MAX_IDLE_STEPS, Agent, AgentContext
from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.rundir import RunDir
from nodice.evolution.session import BudgetExhausted, RunSession
from nodice.evolution.tools import AgentTools

if TYPE_CHECKING:
    from nodice.evolution.engine import Engine  # the engine imports this module when it runs islands

_WATCH_S = 0.5


class Island:
    """One agent loop on its own workspace; :meth:`run` is the body of its thread."""

    def __init__(self, number: int, agent: Agent, engine: Engine, shared: Any, halt: threading.Event):
        self.number, self.agent, self.engine, self.shared, self.halt = number, agent, engine, shared, halt
        self.note = ""
        self.error: BaseException | None = None
        self.session: RunSession | None = None

    def must_stop(self) -> bool:
        return self.halt.is_set() or self.engine.must_stop()

    def run(self) -> None:
        # The session is opened here: its store connection belongs to this thread.
        engine, config = self.engine, self.engine.config
        spread = engine.session.executor or ExecutorConfig()
        session = self.session = RunSession(
            RunDir(engine.run.root, island=self.number),
            config,
            self.shared,
            ExecutorConfig(spread.kind, 1, spread.ray_address),
        )
        session.direction = engine.session.direction

        def should_stop() -> bool:
            left = session.evaluations_left()
            return self.must_stop() or (left is not None and left <= 0)

        knowledge = KnowledgeBase([Path(d) for d in config.knowledge_dirs])
        tools = AgentTools(session, knowledge, self.agent.name)
        ctx = AgentContext(
            session, tools, knowledge, config, should_stop=should_stop, must_stop=self.must_stop
        )
        try:
            self._loop(ctx)
        except BaseException as exc:  # reported by the engine's thread, after the others stopped
            self.error = exc
            self.halt.set()
        finally:
            session.close()

    def _loop(self, ctx: AgentContext) -> None:
        # Every island starts from the best version (a resumed run: the best now).
        ctx.session.run.write_workspace(ctx.session.best_files())
        self.agent.start(ctx)
        idle = 0
        while not ctx.should_stop():
            try:
                report = self.agent.step(ctx)
            except BudgetExhausted:
                time.sleep(_WATCH_S)  # the others' evaluations in flight hold what is left
                continue
            if report.exhausted:
                self.note = f"island {self.number}: nothing left to try ({report.note})"
                return
            idle = 0 if report.attempts else idle + 1
            if idle >= MAX_IDLE_STEPS:
                self.note = f"island {self.number}: no evaluation in {MAX_IDLE_STEPS} steps"
                return


def run_islands(engine: Engine, agents: list[Agent]) -> None:
    """Run one island per agent until the budget is spent, a stop, or every agent is done."""
    halt = threading.Event()
    if all(getattr(a, "evaluates_in_process", True) for a in agents):
        shared = engine.session.evaluator  # the N workers, judging whichever island asks
    else:
        # Command agents judge in their own `nodice run eval` processes: the driver holds no slot.
        engine.session.release_evaluator()
        shared = None
    islands = [Island(number, agent, engine, shared, halt) for number, agent in enumerate(agents)]
    threads = [threading.Thread(target=i.run, name=f"nodice-island-{i.number}", daemon=True) for i in islands]
    for t in threads:
        t.start()
    engine.progress.note(f"{len(islands)} islands on one lineage")
    while any(t.is_alive() for t in threads):
        halt.wait(_WATCH_S)
        engine.island_sessions = [i.session for i in islands if i.session is not None]
        engine.observe()
    engine.island_sessions = []
    failed = next((i.error for i in islands if i.error is not None), None)
    if failed is not None:
        raise failed
    if not engine.should_stop():
        notes = "; ".join(i.note for i in islands if i.note)
        engine.stop_reason = f"every island stopped ({notes})"
