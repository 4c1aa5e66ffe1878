"""Wall time of a candidate's calls on the task's own correctness-sized inputs, first call apart.

    python3 lab/candidates/time_calls.py FILE --task TASK [--device cuda] [--batches 1 256 2048]
        [--json OUT.json]

For each batch size: the first call (Triton compilation and module loading included), then
three more on new inputs of the same shape, each synchronised, and the reference's time on the
same inputs. Answers "which call is slow" when the gate reports a step past its budget, without
the gate's other work around it. Writes one JSON object (also printed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from nodice.loader import load_candidate
from nodice.tasks import get_task


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, args, device: torch.device) -> float:  # type: ignore[no-untyped-def]
    _sync(device)
    t0 = time.perf_counter()
    fn(*args)
    _sync(device)
    return round((time.perf_counter() - t0) * 1e3, 3)


def _draw(task, problem, gen: torch.Generator, batch: int) -> tuple:  # type: ignore[no-untyped-def]
    return tuple(task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen))


def _draw(task, problem, gen: torch.Generator, batch: int) -> tuple:  # type: ignore[no-untyped-def]
    return tuple(task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--task", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 256, 2048])
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    device = torch.device(opts.device)
    task = get_task(opts.task)
    dtype = task.dtype_for(device)
    cand = load_candidate(opts.file, "kernel", task.arity)
    gen = torch.Generator().manual_seed(0)
    problem = task.problem(gen, device, dtype)
    report: dict[str, object] = {"file": opts.file, "task": opts.task, "device": str(device), "rows": []}
    for batch in opts.batches:
        t0 = time.perf_counter()
        args = _draw(task, problem, gen, batch)
        inputs_ms = round((time.perf_counter() - t0) * 1e3, 3)
        first = _timed(cand.fn, args, device)
        later = [_timed(cand.fn, _draw(task, problem, gen, batch), device) for _ in range(3)]
        reference = _timed(task.reference, args, device)
        row = {"batch": batch, "inputs_ms": inputs_ms, "first_ms": first, "later_ms": later}
        row["reference_ms"] = reference
        report["rows"].append(row)  # type: ignore[attr-defined]
        print(json.dumps(row), flush=True)
        if opts.json:
            opts.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
