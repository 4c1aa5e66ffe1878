"""The supervisor: notices stagnation and loops of failing edits, reviews the trajectory, redirects.

Triggers:
- stagnation: no commit over the last ``stagnation_window`` evaluations;
- loop: the last ``loop_window`` evaluations were all rejected for the same
  reason, or one source was evaluated again and again.

On a trigger it writes a review of the whole trajectory (outcomes, the best
score's progress, what got committed, what keeps failing) and proposes
directions: an LLM picks among them when one is configured, the rule catalog
otherwise. Every intervention goes to the journal, the state and the report.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from nodice.evolution.directions import CATALOG, Direction
from nodice.evolution.journal import Attempt, Intervention
from nodice.evolution.scores import standing_of
from nodice.evolution.session import GATE_REJECTIONS


@dataclass
class SupervisorConfig:
    stagnation_window: int = 6
    loop_window: int = 3


def find_trigger(attempts: list[Attempt], last: Intervention | None, cfg: SupervisorConfig) -> str | None:
    since_intervention = [a for a in attempts if last is None or a.id > last.after_attempt]
    if len(since_intervention) < cfg.loop_window:
        return None
    recent = since_intervention[-cfg.loop_window :]
    outcomes = {a.outcome for a in recent}
    if len(outcomes) == 1 and recent[0].outcome in GATE_REJECTIONS:
        return f"loop: the last {len(recent)} evaluations were all rejected ({recent[0].outcome})"
    repeats = Counter(a.files_sha for a in since_intervention[-2 * cfg.loop_window :])
    _, n = repeats.most_common(1)[0]
    if n >= cfg.loop_window:
        return f"loop: the same source was evaluated {n} times"
    last_commit = max((i for i, a in enumerate(attempts) if a.outcome == "committed"), default=-1)
    without_gain = len(attempts) - 1 - last_commit
    if without_gain >= cfg.stagnation_window and len(since_intervention) >= cfg.stagnation_window:
        return f"stagnation: no improvement over the last {without_gain} evaluations"
    return None


def review_trajectory(attempts: list[Attempt], interventions: list[Intervention]) -> str:
    counts = Counter(a.outcome for a in attempts)
    committed = [a for a in attempts if a.outcome == "committed"]
    lines = [
        f"{len(attempts)} evaluations: "
        + ", ".join(f"{k} {v}" for k, v in counts.most_common())
        + f"; {len(interventions)} earlier interventions."
    ]
    if committed:
        first, best = committed[0], committed[-1]
        gain = (best.geomean / first.geomean - 1) * 100 if first.geomean > 0 else 0.0
        lines.append(
            f"best geomean {standing_of(best.scores, best.geomean)} (v{best.version}), "
            f"{gain:+.1f}% over v{first.version}."
        )
        lines.append("committed: " + "; ".join(a.label for a in committed[-6:]))
    recent = attempts[-8:]
    failing = Counter(a.label for a in recent if a.rejection and a.rejection != "slower")
    if failing:
        lines.append("recently rejected by the gate: " + ", ".join(f"{k} ({v}x)" for k, v in failing.items()))
    slower = [a.label for a in recent if a.outcome == "slower"]
    if slower:
        lines.append("passed but not faster: " + ", ".join(slower))
    return " ".join(lines)


def rule_directions(attempts: list[Attempt], interventions: list[Intervention], trigger: str) -> list[str]:
    """Directions ranked by the rule catalog, avoiding those of the last two interventions."""
    recent = attempts[-6:]
    outcomes = Counter(a.outcome for a in recent)
    ranked: list[str] = []
    if outcomes["bi_violation"] >= 2 or "bi_violation" in trigger:
        ranked.append("bi_repair")
    if outcomes["incorrect"] + outcomes["error"] >= 2:
        ranked.append("correctness_repair")
    if outcomes["slower"] >= 2:
        ranked.append("combine")
    ranked += ["structure", "tiling", "launch", "explore"]
    used = [iv.chosen for iv in interventions[-2:]]
    fresh = [d for d in dict.fromkeys(ranked) if d not in used]
    return fresh or list(dict.fromkeys(ranked))


class Supervisor:
    """Watches the journal after every evaluation; returns an intervention when one is due."""

    def __init__(self, config: SupervisorConfig | None = None, advisor: Callable[[str], str] | None = None):
        self.config = config or SupervisorConfig()
        self.advisor = advisor

    def check(self, attempts: list[Attempt], interventions: list[Intervention]) -> Intervention | None:
        if not attempts:
            return None
        trigger = find_trigger(attempts, interventions[-1] if interventions else None, self.config)
        if trigger is None:
            return None
        review = review_trajectory(attempts, interventions)
        directions = rule_directions(attempts, interventions, trigger)
        chosen, source = directions[0], "rules"
        if self.advisor is not None:
            picked = self._ask(trigger, review, directions)
            if picked is not None:
                chosen, review, source = picked[0], f"{review} Advisor: {picked[1]}", "llm"
        return Intervention(
            id=0,
            created=time.time(),
            after_attempt=attempts[-1].id,
            trigger=trigger,
            review=review,
            directions=directions,
            chosen=chosen,
            source=source,
        )

    def _ask(self, trigger: str, review: str, directions: list[str]) -> tuple[str, str] | None:
        options = "\n".join(f"- {name}: {CATALOG[name].text}" for name in directions if name in CATALOG)
        prompt = (
            "You supervise an evolutionary search for a fast, batch-invariant GPU kernel.\n"
            f"Trigger: {trigger}\nTrajectory: {review}\n\nPossible directions:\n{options}\n\n"
            "Answer with one line 'DIRECTION: <name>' followed by two sentences of advice."
        )
        assert self.advisor is not None
        try:
            answer = self.advisor(prompt)
        except Exception:  # an advisor outage must not stop the run: the rules decide instead
            return None
        m = re.search(r"DIRECTION:\s*([a-z_]+)", answer or "")
        if not m or m.group(1) not in CATALOG:
            return None
        advice = (answer or "").split("\n", 1)[1].strip() if "\n" in (answer or "") else ""
        return m.group(1), advice[:600]


def as_direction(iv: Intervention) -> Direction:
    return CATALOG.get(iv.chosen) or Direction(iv.chosen, iv.chosen)
