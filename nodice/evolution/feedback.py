"""Turn an evaluation into diagnostics an agent can act on: verdict, where it failed, how to repair it."""

from __future__ import annotations

from typing import Any

from nodice.evolution.scores import limit_text, ratio_text, standing_of, unit_of, value_text
from nodice.gate.result import CheckResult


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
        if f.guidance and f.severity != "cleared":
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
    """The score as throughput, per workload, beside every baseline measured in the same run."""
    if not scores:
        return []
    unit = unit_of(scores)
    lines = [
        f"score: geomean throughput {standing_of(scores, geomean)}; higher is better, "
        "0 as soon as one workload is wrong"
    ]
    for s in scores:
        lines += _describe_workload(s, unit)
    return lines


def _describe_workload(s: dict[str, Any], unit: str | None) -> list[str]:
    name = s.get("workload", "?")
    if not s.get("correct", True):
        return [f"  {name}: 0 (incorrect: {str(s.get('detail', ''))[:160]})"]
    ms = s.get("ms")
    timing = f" in {ms:.4g} ms" if isinstance(ms, (int, float)) and ms > 0 else ""
    fraction = s.get("limit_fraction")
    limit = f", {limit_text(fraction, unit)}" if isinstance(fraction, (int, float)) else ""
    lines = [f"  {name}: {value_text(float(s.get('score', 0.0)), unit)}{timing}{limit}"]
    baselines = s.get("baselines") or {}
    parts = []
    for base, b in baselines.items() if isinstance(baselines, dict) else []:
        if not isinstance(b, dict):
            continue
        verdict = f", BI {b['bi']}" if b.get("bi") else ""
        if not b.get("correct", True) or not b.get("throughput"):
            parts.append(f"{base} (not comparable: {str(b.get('detail') or 'incorrect')[:80]}{verdict})")
            continue
        ratio = ratio_text(float(b.get("ratio") or 0.0))
        parts.append(f"{base} {value_text(float(b['throughput']), unit)} (yours is {ratio}{verdict})")
    if parts:
        best = s.get("best_baseline")
        versus = s.get("ratio_best")
        several = len(parts) > 1
        tail = (
            f"; fastest: {best}, yours is {ratio_text(versus)}"
            if several and best and versus is not None
            else ""
        )
        lines.append("      baselines: " + "; ".join(parts) + tail)
    return lines


OUTCOME_ADVICE = {
    "eligible": "passes the whole gate and its geomean throughput is at least the best version's: commit it.",
    "committed": "committed as a new version.",
    "committing": "being committed as a new version.",
    "slower": "passes the gate but is slower than the best version: it will not be committed.",
    "gate_only": "passes the gate; run the benchmark to get a score before committing.",
    "bi_violation": "rejected: violates batch invariance; it can never be committed as is.",
    "incorrect": "rejected: does not match the reference within tolerance.",
    "cheat": "rejected: calls the reference or a library implementation of the whole operation.",
    "error": "rejected: could not be judged (load error, crash, timeout or bad output).",
    "bits_differ": "passes the gate but its outputs differ bitwise from the best version's: another "
    "kernel, not a faster setting of it; not timed (stage same_bits names the first difference).",
}


def feedback_text(
    check: CheckResult,
    scores: list[dict[str, Any]],
    geomean: float,
    outcome: str,
    best: float,
    best_unit: str | None = None,
) -> str:
    lines = describe_check(check)
    lines += describe_scores(scores, geomean)
    if best > 0:
        lines.append(f"best committed geomean so far: {value_text(best, best_unit or unit_of(scores))}")
    lines.append(f"outcome: {outcome} — {OUTCOME_ADVICE.get(outcome, '')}")
    return "\n".join(lines)
