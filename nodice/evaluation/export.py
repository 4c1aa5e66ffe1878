"""Export stored evaluations as JSONL in FlashInfer-Bench's Trace shape, with the BI verdict added.

One line per (evaluation, workload): ``definition`` (the task), ``workload``
(axes, inputs, uuid), ``solution`` (candidate name and hash) and
``evaluation`` (status, environment, timestamp, log, correctness,
performance). nodice adds ``evaluation.batch_invariance`` (the gate's verdict,
cheat rule, stages and first mismatch) and two statuses FlashInfer-Bench does
not have: ``BI_VIOLATION`` and ``CHEAT``. A candidate rejected before the
benchmark gets one line with an empty workload.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nodice.bench.score import WorkloadScore
from nodice.evaluation.record import Evaluation
from nodice.evaluation.store import ResultStore

_NAMESPACE = uuid.UUID("6f1c3a52-3d4e-4e0b-9a57-6e6f64696365")


def _status(e: Evaluation, score: WorkloadScore | None) -> str:
    verdict = e.verdict
    if verdict == "pass":
        return "PASSED" if score is None or score.correct else "INCORRECT_NUMERICAL"
    if verdict == "bi_violation":
        return "BI_VIOLATION"
    if verdict == "cheat":
        return "CHEAT"
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


def _workload(task: str, score: WorkloadScore | None) -> dict[str, Any]:
    if score is None:
        return {"axes": {}, "inputs": {}, "uuid": str(uuid.uuid5(_NAMESPACE, f"{task}/gate"))}
    axes = {k: v for k, v in score.params.items() if isinstance(v, int) and not isinstance(v, bool)}
    return {
        "axes": axes,
        "inputs": score.inputs,
        "uuid": str(uuid.uuid5(_NAMESPACE, f"{task}/{score.workload}/{json.dumps(axes, sort_keys=True)}")),
        "name": score.workload,
    }


def trace_records(e: Evaluation) -> list[dict[str, Any]]:
    """FlashInfer-Bench-shaped traces of one evaluation."""
    solution = f"{Path(e.candidate).stem}-{e.sha256[:12]}" if e.sha256 else Path(e.candidate).stem
    bi = {
        "verdict": e.verdict,
        "cheat_rule": e.cheat_rule,
        "reason": e.check.reason,
        "stages": {s.name: {"verdict": s.verdict, "ms": s.ms} for s in e.check.stages},
        "mismatch": e.check.to_dict()["mismatch"],
        "device": e.device,
    }
    out = []
    rows: list[WorkloadScore | None] = list(e.scores) or [None]
    for score in rows:
        status = _status(e, score)
        evaluation: dict[str, Any] = {
            "status": status,
            "environment": _environment(e),
            "timestamp": e.timestamp,
            "log": e.check.reason or e.log,
            "correctness": None,
            "performance": None,
            "batch_invariance": bi,
        }
        if score is not None:
            evaluation["correctness"] = {
                "max_relative_error": score.max_rel_error,
                "max_absolute_error": score.max_abs_error,
                "extra": {"detail": score.detail} if score.detail else None,
            }
            if status == "PASSED":
                evaluation["performance"] = {
                    "latency_ms": score.ms,
                    "reference_latency_ms": score.reference_ms,
                    "speedup_factor": score.ratio_best
                    if score.ratio_best is not None
                    else score.speedup_vs_reference,
                    "throughput": score.throughput,
                    "unit": score.unit,
                    "limit_fraction": score.limit_fraction,
                    "best_baseline": score.best_baseline,
                    "baselines_ms": {n: b.ms for n, b in score.baselines.items()},
                    "tflops": score.tflops,
                    "gbps": score.gbps,
                }
        out.append(
            {
                "definition": e.task,
                "workload": _workload(e.task, score),
                "solution": solution,
                "evaluation": evaluation,
            }
        )
    return out


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
