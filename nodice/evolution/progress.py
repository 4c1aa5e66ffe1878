"""Live progress of a run: best geomean, evaluations, commits, rejections by reason, direction.

The best geomean is shown in the task's unit with where it stands: its ratio to
the fastest baseline and the fraction of the device's ceiling ("best 3012 GB/s
(0.93× best baseline, 71% of copy bandwidth) +12.0% over v0").

On a terminal it is a rich live panel; elsewhere (CI, pipes) one plain line
per event, so logs stay readable.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from nodice.evolution.journal import Attempt, Intervention
from nodice.evolution.lineage import VersionRecord
from nodice.evolution.scores import limit_fraction_of, ratio_best_of, standing_text, unit_of, value_text

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
    unit: str = ""
    best_ratio: float | None = None
    best_limit_fraction: float | None = None
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

    def standing(self) -> str:
        """``3012 GB/s (0.93× best baseline, 71% of copy bandwidth)``."""
        return standing_text(self.best_geomean, self.unit, self.best_ratio, self.best_limit_fraction)


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
        versions: list[VersionRecord],
        rejections: dict[str, int],
    ) -> None:
        """Counters from the journal and the lineage (attempts change outcome when committed later)."""
        s = self.state
        s.evaluations, s.commits, s.rejections = evaluations, len(versions), dict(rejections)
        s.first_geomean = versions[0].geomean if versions else 0.0
        if versions:
            best = versions[-1]
            self._set_best(best.geomean, best.version, best.scores)
            s.unit, s.best_ratio = best.unit or s.unit, best.ratio_best
        else:
            s.best_geomean, s.best_version, s.best_ratio, s.best_limit_fraction = 0.0, None, None, None
        self._refresh()

    def _set_best(self, geomean: float, version: int | None, scores: list[dict[str, Any]]) -> None:
        s = self.state
        s.best_geomean, s.best_version = geomean, version
        s.unit = unit_of(scores) or s.unit
        s.best_ratio, s.best_limit_fraction = ratio_best_of(scores), limit_fraction_of(scores)

    def attempt(self, a: Attempt, evaluations: int) -> None:
        s = self.state
        s.evaluations, s.current = evaluations, ""
        if a.outcome == "committed" and a.geomean >= s.best_geomean:
            s.first_geomean = s.first_geomean or a.geomean
            self._set_best(a.geomean, a.version, a.scores)
        unit = unit_of(a.scores) or s.unit
        score = f"geomean {value_text(a.geomean, unit)}" if a.geomean > 0 else ""
        version = f" -> v{a.version}" if a.version is not None else ""
        reason = f" ({a.reason[:100]})" if a.rejection and a.rejection != "slower" and a.reason else ""
        line = f"#{a.id} {a.label}: {a.outcome}{version} {score}{reason}".rstrip()
        s.recent.append(line)
        if self._live is None:
            best = f"best {s.standing()} {s.gain()}".rstrip() if s.best_version is not None else "no best yet"
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
        if s.best_version is not None:
            gain = f", {s.gain()}" if s.gain() else ""
            best = f"{s.standing()} · v{s.best_version}{gain}"
        else:
            best = "none yet"
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
