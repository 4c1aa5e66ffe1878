"""Findings: building them with their dependency path, removing echoes of one cause, rendering."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from nodice.gate.result import Finding
from nodice.gate.static.rules import rule


@dataclass
class Collector:
    """Gathers findings during one analysis; ``weak`` ones are dropped when a stronger one explains them."""

    items: list[Finding] = field(default_factory=list)
    weak: set[int] = field(default_factory=set)
    _seen: set[tuple[str, str, int, str, str]] = field(default_factory=set)

    def add(
        self,
        rule_id: str,
        file: str,
        line: int,
        protected: str,
        message: str,
        path: Iterable[str],
        *,
        mechanism: str | None = None,
        guidance: str | None = None,
        weak: bool = False,
        branch: dict[str, Any] | None = None,
    ) -> None:
        r = rule(rule_id)
        steps = list(path)
        key = (rule_id, file, line, protected, steps[0] if steps else "")
        if key in self._seen:
            return
        self._seen.add(key)
        f = Finding(
            rule=rule_id,
            mechanism=mechanism or r.mechanism,
            protected=protected,
            file=file,
            line=line,
            message=message,
            path=steps,
            guidance=guidance or r.guidance,
            severity=r.severity,
            branch=branch,
        )
        if weak:
            self.weak.add(id(f))
        self.items.append(f)

    def result(self) -> tuple[list[Finding], list[Finding]]:
        """(violations, unresolved), one finding per cause, ordered by file and line."""
        strong = [f for f in self.items if id(f) not in self.weak]
        kept = list(strong)
        for f in self.items:
            if (
                id(f) in self.weak
                and f.path
                and not any(_where(f.path[-1]) in map(_where, g.path) for g in strong)
            ):
                kept.append(f)
        out: list[Finding] = []
        for f in sorted(kept, key=lambda f: (f.severity != "violation", len(f.path))):
            prefix = f.path[:-1]
            # One cause, one finding: drop a finding whose flow repeats (or extends) one already kept
            # for the same mechanism and parameter, or extends it to a value derived from it.
            if any(
                g.mechanism == f.mechanism
                and g.severity == f.severity
                and _is_prefix(g.path[:-1], prefix)
                and (g.protected == f.protected or len(g.path) < len(f.path) - 1)
                for g in out
            ):
                continue
            out.append(f)
        out.sort(key=lambda f: (f.file, f.line, f.rule))
        return [f for f in out if f.severity == "violation"], [f for f in out if f.severity == "unresolved"]


def _where(step: str) -> str:
    return step.split(": ", 1)[0]


def _is_prefix(short: list[str], long: list[str]) -> bool:
    return bool(short) and len(short) <= len(long) and long[: len(short)] == short


def finding_lines(f: Finding) -> list[str]:
    """The human form of one finding: a headline, the dependency path, the repair."""
    lines = [f"[{f.severity}] {f.file}:{f.line} {f.mechanism} → {f.protected}: {f.message}"]
    lines += [f"    {step}" for step in f.path]
    if f.guidance:
        lines.append(f"    fix: {f.guidance}")
    return lines


def render_text(violations: list[Finding], unresolved: list[Finding]) -> str:
    lines: list[str] = []
    for f in violations + unresolved:
        lines += finding_lines(f)
    if not lines:
        lines.append("static: no batch-dependent flow into a protected parameter")
    return "\n".join(lines)


def render_json(violations: list[Finding], unresolved: list[Finding]) -> str:
    return json.dumps(
        {
            "verdict": "reject" if violations else ("unresolved" if unresolved else "pass"),
            "findings": [asdict(f) for f in violations + unresolved],
        },
        indent=2,
    )
