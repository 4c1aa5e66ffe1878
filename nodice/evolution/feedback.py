"""Turn an evaluation into diagnostics an agent can act on: verdict, where it failed, how to repair it."""

from __future__ import annotations

import dataclasses
from typing import Any

from nodice.gate.result import CheckResult


def score_dicts(scores: list[Any]) -> list[dict[str, Any]]:
    """Per-workload scores as plain dicts (the evaluation service's dataclasses, or dicts already)."""
    out: list[dict[str, Any]] = []
    for s in scores:
        if dataclasses.is_dataclass(s) and not isinstance(s, type):
            out.append(dataclasses.asdict(s))
        elif isinstance(s, dict):
            out.append(dict(s))
    return out


def stage_verdicts(check: CheckResult) -> dict[str, str]:
    return {s.name: s.verdict for s in check.stages}


def describe_check(check: CheckResult) -> list[str]:
    """The gate's verdict and diagnostics, one item per line."""
    lines = [f"gate verdict: {check.verdict}" + (f" — {check.reason}" if check.reason else "")]
    for s in check.stages:
        detail = f": {s.detail}" if s.detail else ""
        lines.append(f"  stage {s.name}: {s.verdict} ({s.ms:.0f} ms){detail}")
    for f in check.findings[:6]:
        lines.append(
            f"  finding [{f.severity}] {f.file}:{f.line} {f.mechanism} -> {f.protected}: {f.message}"
        )
        lines.extend(f"      via {step}" for step in f.path[:6])
        if f.guidance:
            lines.append(f"      repair: {f.guidance}")
    if len(check.findings) > 6:
        lines.append(f"  ... and {len(check.findings) - 6} more findings")
    if check.mismatch is not None:
        lines.append(f"  first mismatch: {check.mismatch.line()}")
        lines.append(f"  context: {check.mismatch.context}")
        lines.append(
            "  repair: make every choice that shapes the reduction (tile sizes, splits, code path) a "
            "function of the per-sample shape only, never of the batch size or batch contents"
        )
    if check.error:
        lines.append(f"  error: {check.error}")
    return lines


def describe_scores(scores: list[dict[str, Any]], geomean: float) -> list[str]:
    if not scores:
        return []
    lines = [f"score (geomean of per-workload speedup over the reference): {geomean:.4g}"]
    for s in scores:
        ms = s.get("ms")
        timing = f"{ms:.3f} ms" if isinstance(ms, (int, float)) else "n/a"
        lines.append(f"  {s.get('workload', '?')}: score {s.get('score', 0.0):.4g}, {timing}")
    return lines


OUTCOME_ADVICE = {
    "eligible": "passes the whole gate and is at least as fast as the best version: commit it.",
    "committed": "committed as a new version.",
    "committing": "being committed as a new version.",
    "slower": "passes the gate but is slower than the best version: it will not be committed.",
    "gate_only": "passes the gate; run the benchmark to get a score before committing.",
    "bi_violation": "rejected: violates batch invariance; it can never be committed as is.",
    "incorrect": "rejected: does not match the reference within tolerance.",
    "cheat": "rejected: calls the reference or a library implementation of the whole operation.",
    "error": "rejected: could not be judged (load error, crash, timeout or bad output).",
}


def feedback_text(
    check: CheckResult, scores: list[dict[str, Any]], geomean: float, outcome: str, best: float
) -> str:
    lines = describe_check(check)
    lines += describe_scores(scores, geomean)
    if best > 0:
        lines.append(f"best committed geomean so far: {best:.4g}")
    lines.append(f"outcome: {outcome} — {OUTCOME_ADVICE.get(outcome, '')}")
    return "\n".join(lines)
