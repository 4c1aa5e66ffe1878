"""Live progress of a run: best geomean, evaluations, commits, rejections by reason, direction.

On a terminal it is a rich live panel; elsewhere (CI, pipes) one plain line
per event, so logs stay readable.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from nodice.evolution.journal import Attempt, Intervention

_OUTCOME_STYLE = {
    "committed": "bold green",
    "slower": "yellow",
    "gate_only": "cyan",
    "eligible": "green",
    "bi_violation": "bold red",
    "incorrect": "red",
    "cheat": "magenta",
    "error": "red",
}


@dataclass
class ProgressState:
    task: str
    agent: str
    device: str
    budget: int | None = None
    time_budget_s: float | None = None
    evaluations: int = 0
    commits: int = 0
    first_geomean: float = 0.0
    best_geomean: float = 0.0
    best_version: int | None = None
    rejections: dict[str, int] = field(default_factory=dict)
    direction: str = "(initial)"
    current: str = ""
    interventions: int = 0
    started: float = field(default_factory=time.monotonic)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=8))

    def gain(self) -> str:
        if self.first_geomean > 0 and self.best_geomean > 0 and self.best_version:
            return f"{(self.best_geomean / self.first_geomean - 1) * 100:+.1f}% over v0"
        return ""


class Progress:
    def __init__(self, state: ProgressState, console: Console | None = None):
        self.state = state
        self.console = console or Console()
        self._live: Live | None = None

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            # Live re-renders this object on every refresh, so the clock and the current step tick.
            self._live = Live(self, console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        else:
            s = self.state
            self._line(f"evolving {s.task} on {s.device} with the {s.agent} agent")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self.state.current = ""
            self._live.refresh()
            self._live.__exit__(None, None, None)
            self._live = None

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def __rich__(self) -> Panel:
        return self.render()

    def evaluating(self, label: str) -> None:
        self.state.current = f"evaluating {label}"
        self._refresh()

    # ---- events -----------------------------------------------------------------
    def sync(
        self,
        evaluations: int,
        commits: int,
        first: float,
        best: float,
        best_version: int | None,
        rejections: dict[str, int],
    ) -> None:
        """Counters from the journal and the lineage (attempts change outcome when committed later)."""
        s = self.state
        s.evaluations, s.commits, s.first_geomean = evaluations, commits, first
        s.best_geomean, s.best_version, s.rejections = best, best_version, dict(rejections)
        self._refresh()

    def attempt(self, a: Attempt, evaluations: int) -> None:
        s = self.state
        s.evaluations, s.current = evaluations, ""
        if a.outcome == "committed" and a.geomean >= s.best_geomean:
            s.first_geomean = s.first_geomean or a.geomean
            s.best_geomean, s.best_version = a.geomean, a.version
        score = f"geomean {a.geomean:.4g}" if a.geomean > 0 else ""
        version = f" -> v{a.version}" if a.version is not None else ""
        reason = f" ({a.reason[:100]})" if a.rejection and a.rejection != "slower" and a.reason else ""
        line = f"#{a.id} {a.label}: {a.outcome}{version} {score}{reason}".rstrip()
        s.recent.append(line)
        if self._live is None:
            best = f"best {s.best_geomean:.4g} {s.gain()}".rstrip()
            self._line(f"[{s.evaluations}{'/' + str(s.budget) if s.budget else ''}] {line} | {best}")
        self._refresh()

    def intervention(self, iv: Intervention) -> None:
        s = self.state
        s.interventions += 1
        s.direction = iv.chosen
        line = f"supervisor ({iv.source}): {iv.trigger} -> direction '{iv.chosen}'"
        s.recent.append(line)
        if self._live is None:
            self._line(line)
        self._refresh()

    def note(self, text: str) -> None:
        self.state.recent.append(text)
        if self._live is None:
            self._line(text)
        self._refresh()

    # ---- view -----------------------------------------------------------------------
    def render(self) -> Panel:
        s = self.state
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column()
        best = f"{s.best_geomean:.4g}" + (
            f" (v{s.best_version}, {s.gain()})" if s.best_version is not None else ""
        )
        grid.add_row("best geomean", Text(best, style="bold green"))
        budget = f" / {s.budget}" if s.budget else ""
        grid.add_row("evaluations", f"{s.evaluations}{budget}")
        grid.add_row("commits", str(s.commits))
        rejections = ", ".join(f"{k} {v}" for k, v in sorted(s.rejections.items())) or "none"
        grid.add_row("rejections", rejections)
        grid.add_row("direction", f"{s.direction} ({s.interventions} interventions)")
        elapsed = time.monotonic() - s.started
        limit = f" / {s.time_budget_s:.0f}" if s.time_budget_s else ""
        grid.add_row("elapsed", f"{elapsed:.0f}{limit} s")
        if s.current:
            grid.add_row("now", Text(s.current, style="cyan"))
        recent = Text()
        for line in s.recent:
            outcome = next((o for o in _OUTCOME_STYLE if f": {o}" in line), "")
            recent.append(line + "\n", style=_OUTCOME_STYLE.get(outcome, ""))
        title = f"nodice evolve {s.task} · {s.agent} · {s.device}"
        return Panel(Group(grid, Text(""), recent), title=title, border_style="blue")
