"""The agent interface: one step of work on an open run, steered by the supervisor's direction.

An agent is the whole variation operator. Each :meth:`Agent.step` it reads
what it needs (lineage, knowledge, the last diagnostics), edits the workspace,
evaluates, and commits through the run's tools, which enforce the commit rule.
The engine calls ``step`` until the budget is spent or the agent has nothing
left to try.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nodice.errors import NodiceError

if TYPE_CHECKING:
    from nodice.evolution.directions import Direction
    from nodice.evolution.knowledge import KnowledgeBase
    from nodice.evolution.rundir import RunConfig
    from nodice.evolution.session import RunSession
    from nodice.evolution.tools import AgentTools

# Steps in a row without an evaluation before a run (or an island) gives up on its agent.
MAX_IDLE_STEPS = 25


class AgentError(NodiceError):
    kind = "agent failed"


@dataclass
class AgentContext:
    """What an agent works with during a run."""

    session: RunSession
    tools: AgentTools
    knowledge: KnowledgeBase
    config: RunConfig
    # Lets the engine observe attempts recorded meanwhile (by this agent or by `nodice run` commands).
    poll: Callable[[], None] = field(default=lambda: None)
    # True once the engine wants the agent to wrap up (budget, time, signal).
    should_stop: Callable[[], bool] = field(default=lambda: False)
    # True when work must end now (time budget, signal); a spent evaluation budget still lets an
    # agent commit what it already evaluated.
    must_stop: Callable[[], bool] = field(default=lambda: False)


@dataclass
class StepReport:
    """What one step did. ``exhausted`` means the agent has nothing left to propose."""

    attempts: int = 0
    note: str = ""
    exhausted: bool = False


class Agent(ABC):
    """Base class of every variation operator."""

    name: str = "agent"

    def __init__(self) -> None:
        self.direction: Direction | None = None

    def start(self, ctx: AgentContext) -> None:  # noqa: B027 - optional hook
        """Called once per session, after the run was reconciled (rebuild memory here)."""

    @abstractmethod
    def step(self, ctx: AgentContext) -> StepReport:
        """Do one unit of work: at least one evaluation, unless there is nothing left to try."""

    def redirect(self, direction: Direction, review: str) -> None:
        """The supervisor's new direction, with its review of the trajectory."""
        self.direction = direction

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and processes."""
