"""Export stored evaluations as JSONL in FlashInfer-Bench's Trace schema, with the BI verdict added.

One line per (evaluation, workload): ``definition`` (the task), ``workload``
(axes, inputs, uuid), ``solution`` (candidate name and hash) and
``evaluation`` (status, environment, timestamp, log, correctness,
performance), valid for FlashInfer-Bench's own ``Trace`` model and loaders.
Its schema has no status for a rejection by the gate and no field for the
verdict, so a ``bi_violation`` or ``cheat`` is ``INCORRECT_NUMERICAL`` (never
ranked: its loaders rank ``PASSED`` traces only), and the gate's verdict (cheat
rule, stages, first mismatch) is ``correctness.extra["batch_invariance"]``,
the one free-form field it has; statuses that carry no correctness (errors,
wrong shapes or dtypes) say the verdict in ``log``'s first line. A candidate
rejected before the benchmark gets one line with an empty workload.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nodice.evaluation.record import Evaluation
from nodice.evaluation.store import ResultStore
from nodice.measuring.score import WorkloadScore

_NAMESPACE = uuid.UUID("6f1c3a52-3d4e-4e0b-9a57-6e6f64696365")


# FlashInfer-Bench's statuses that carry correctness metrics (its Evaluation model requires them there
# and forbids them elsewhere).
_WITH_CORRECTNESS = ("PASSED", "INCORRECT_NUMERICAL")


def _status(e: Evaluation, score: WorkloadScore | None) -> str:
    verdict = e.verdict
    if verdict == "pass":
        return "PASSED" if score is None or score.correct else "INCORRECT_NUMERICAL"
    if verdict in ("bi_violation", "cheat"):
        return "INCORRECT_NUMERICAL"
    reason = e.check.reason or e.check.error or ""
    if verdict == "incorrect":
        if "has shape" in reason:
            return "INCORRECT_SHAPE"
        if "has dtype" in reason:
            return "INCORRECT_DTYPE"
        return "INCORRECT_NUMERICAL"
    if "timed out" in reason:
        return "TIMEOUT"
    if "cannot load candidate" in reason or "bad entry point" in reason:
        return "COMPILE_ERROR"
    return "RUNTIME_ERROR"


def _environment(e: Evaluation) -> dict[str, Any]:
    env = e.environment
    hardware = env.get("gpu") or env.get("cpu") or e.device or "unknown"
    libs = {k: str(env[k]) for k in ("torch", "triton", "cuda", "cudnn", "python") if env.get(k) is not None}
    return {"hardware": str(hardware).replace(" ", "_"), "libs": libs}


def _workload(task: str, score: WorkloadScore | None, axes_names: dict[str, str] | None) -> dict[str, Any]:
    if score is None:
        return {"axes": {}, "inputs": {}, "uuid": str(uuid.uuid5(_NAMESPACE, f"{task}/gate"))}
    axes = {k: v for k, v in score.params.items() if isinstance(v, int) and not isinstance(v, bool)}
    if axes_names is not None:
        axes = {axes_names[k]: v for k, v in axes.items() if k in axes_names}
    inputs = {
        name: {"type": "scalar", "value": spec["value"]}
        if spec.get("type") == "scalar"
        else {"type": "random"}
        for name, spec in score.inputs.items()
        # FlashInfer-Bench's scalar inputs are numbers or booleans: anything else is left out.
        if spec.get("type") != "scalar" or isinstance(spec.get("value"), (int, float, bool))
    }
    return {
        "axes": axes,
        "inputs": inputs,
        "uuid": str(uuid.uuid5(_NAMESPACE, f"{task}/{score.workload}/{json.dumps(axes, sort_keys=True)}")),
    }


def batch_invariance(e: Evaluation) -> dict[str, Any]:
    """The gate's verdict as the traces carry it."""
    return {
        "verdict": e.verdict,
        "cheat_rule": e.cheat_rule,
        "reason": e.check.reason,
        "stages": {s.name: {"verdict": s.verdict, "ms": s.ms} for s in e.check.stages},
        "mismatch": e.check.to_dict()["mismatch"],
        "device": e.device,
    }


def _mismatch_errors(e: Evaluation) -> tuple[float, float]:
    """A rejected candidate's errors: its first batch-dependent difference (0 after a static rejection)."""
    m = e.check.mismatch
    if m is None or not (math.isfinite(m.expected) and math.isfinite(m.got)):
        return 0.0, 0.0
    diff = abs(m.got - m.expected)
    return diff, diff / abs(m.expected) if m.expected else 0.0


def trace_records(
    e: Evaluation,
    definition: str | None = None,
    solution: str | None = None,
    axes_names: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """FlashInfer-Bench traces of one evaluation.

    ``definition`` and ``solution`` name the trace's definition and solution (default: the task and the
    candidate file with its hash); ``axes_names`` renames the workload's task parameters to the
    definition's variable axes (the others are left out).
    """
    if solution is None:
        solution = f"{Path(e.candidate).stem}-{e.sha256[:12]}" if e.sha256 else Path(e.candidate).stem
    bi = batch_invariance(e)
    out = []
    rows: list[WorkloadScore | None] = list(e.scores) or [None]
    for score in rows:
        status = _status(e, score)
        reason = e.check.reason or e.check.error or ""
        evaluation: dict[str, Any] = {
            "status": status,
            "environment": _environment(e),
            "timestamp": e.timestamp or "unknown",
            "log": f"nodice batch invariance: {e.verdict}"
            + (f" — {reason}" if reason else "")
            + (f"\n{e.log}" if e.log else ""),
            "correctness": None,
            "performance": None,
        }
        if status in _WITH_CORRECTNESS:
            if score is not None:
                abs_err, rel_err = score.max_abs_error, score.max_rel_error
            else:
                abs_err, rel_err = _mismatch_errors(e)
            extra: dict[str, Any] = {"batch_invariance": bi}
            if score is not None and score.detail:
                extra["detail"] = score.detail
            evaluation["correctness"] = {
                "max_relative_error": _finite(rel_err),
                "max_absolute_error": _finite(abs_err),
                "extra": extra,
            }
        if status == "PASSED":
            evaluation["performance"] = _performance(score)
            # What was not measured is null here, where FlashInfer-Bench's schema allows it.
            evaluation["correctness"]["extra"]["performance"] = {
                **dict.fromkeys(_PERFORMANCE_FIELDS),
                **evaluation["performance"],
            }
            if score is not None:
                evaluation["correctness"]["extra"]["performance"] |= {
                    "throughput": score.throughput,
                    "unit": score.unit,
                    "limit_fraction": score.limit_fraction,
                    "best_baseline": score.best_baseline,
                    "ratio_best": score.ratio_best,
                    "baselines_ms": {n: b.ms for n, b in score.baselines.items()},
                    "tflops": score.tflops,
                    "gbps": score.gbps,
                }
        out.append(
            {
                "definition": definition or e.task,
                "workload": _workload(e.task, score, axes_names),
                "solution": solution,
                "evaluation": evaluation,
            }
        )
    return out


# FlashInfer-Bench's Performance fields. Its model types each as a float >= 0 with the default 0.0 and
# forbids null, and FlashInfer-Bench writes an unmeasured one as that default (its evaluators fill
# what they time; a trace nothing timed is ``Performance()``). So an unmeasured field is left out of
# ``performance`` and validation fills in FlashInfer-Bench's own 0.0, and the trace says which were
# measured in ``correctness.extra["performance"]``, null for the others.
_PERFORMANCE_FIELDS = ("latency_ms", "reference_latency_ms", "speedup_factor")


def _performance(score: WorkloadScore | None) -> dict[str, float]:
    """The fields of FlashInfer-Bench's ``Performance`` that were measured (none without a score).

    Its speedup is over the definition's reference, which nodice does not time (legacy records aside):
    the ratio to the best library baseline stays in ``extra``, not in ``speedup_factor``.
    """
    if score is None:
        return {}
    out = {"latency_ms": score.ms}
    if score.reference_ms:
        out["reference_latency_ms"] = score.reference_ms
    if score.speedup_vs_reference is not None:
        out["speedup_factor"] = score.speedup_vs_reference
    return out


def _finite(x: float | None) -> float:
    """A non-negative finite error (FlashInfer-Bench rejects negatives; JSON has no inf)."""
    if x is None or not math.isfinite(x):
        return 0.0 if x is None or math.isnan(x) else 3.4e38
    return abs(x)


def export_jsonl(evaluations: Iterable[Evaluation], path: str | Path) -> int:
    """Write the traces of ``evaluations`` to ``path`` (one JSON object per line); returns the line count."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for e in evaluations:
            for record in trace_records(e):
                f.write(json.dumps(record) + "\n")
                n += 1
    return n


def export_store(store_path: str | Path, path: str | Path, run_id: str | None = None) -> int:
    with ResultStore(store_path) as store:
        return export_jsonl(store.evaluations(run_id=run_id), path)
