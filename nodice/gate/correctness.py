"""Reference correctness: fresh random batches, poisoned outputs, exact shape/dtype, per-dtype tolerance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.gate.execute import expected_outputs, run_checked
from nodice.tasks.base import CorrectnessReport, Output, Task

__all__ = ["CorrectnessReport", "check_correctness", "compare"]


def has_own_correctness(task: Task) -> bool:
    """Tasks judged by their own (e.g. distributional) rule cannot be compared call by call."""
    return type(task).check_correctness is not Task.check_correctness


def compare(task: Task, out: Output, ref: Output, dtype: torch.dtype) -> tuple[bool, str, float]:
    """Elementwise ``|out - ref| <= atol + rtol·|ref|`` where the reference is finite, NaN/Inf rejected
    there; where it is not (a -inf log-sum-exp of a row that attends to nothing), the same value exactly:
    a non-finite reference accepts no value but its own (a reference that returns NaN for the gate's
    finite inputs is refused before any comparison, ``nodice.tasks.reference_output``)."""
    tol = task.tolerance(dtype)
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    worst = 0.0
    for name, o, r in zip(task.output_names, outs, refs, strict=True):
        of, rf = o.float(), r.float()
        finite_ref = torch.isfinite(rf)
        bad_values = ~torch.isfinite(of) & finite_ref
        if bool(bad_values.any()):
            idx = [int(i) for i in torch.nonzero(bad_values)[0]]
            return False, f"{name}{idx} is {of[tuple(idx)].item()} (NaN/Inf or never written)", float("inf")
        err = (of - rf).abs()
        if not bool(finite_ref.all()):
            # NaN where the reference is NaN, the same infinity where it is one.
            unlike = ~finite_ref & ~((of == rf) | (torch.isnan(of) & torch.isnan(rf)))
            if bool(unlike.any()):
                idx = [int(i) for i in torch.nonzero(unlike)[0]]
                at = tuple(idx)
                return (
                    False,
                    f"{name}{idx} = {of[at].item():.6g}, reference {rf[at].item()} (a non-finite "
                    "reference value is matched exactly)",
                    float("inf"),
                )
            err = torch.where(finite_ref, err, 0.0)
        limit = tol.atol + tol.rtol * rf.abs()
        over = err > limit
        worst = max(worst, float(err.max()) if err.numel() else 0.0)
        if bool(over.any()):
            idx = [int(i) for i in torch.nonzero(over)[0]]
            n = int(over.sum())
            return (
                False,
                f"{name}{idx} = {of[tuple(idx)].item():.6g}, reference {rf[tuple(idx)].item():.6g} "
                f"({n}/{over.numel()} elements outside atol={tol.atol}, rtol={tol.rtol})",
                worst,
            )
    return True, "", worst


def check_correctness(
    task: Task, fn: Callable[..., Any], candidate: Path, device: torch.device, dtype: torch.dtype, seed: int
) -> CorrectnessReport:
    """Run the kernel on fresh batches of several sizes and compare with the fp32 reference.

    A task with its own rule (``Task.check_correctness``) judges instead.
    """

    def run(args: tuple[Any, ...]) -> Output:
        return run_checked(task, fn, args, candidate, expected_outputs(task, args), device)

    own = task.check_correctness(run, device, dtype, seed)
    if own is not None:
        return own
    worst = 0.0
    batches = task.correctness_batches(device)
    for trial, batch in enumerate(batches):
        gen = torch.Generator().manual_seed(seed * 7919 + trial)
        problem = task.problem(gen, device, dtype)
        args = task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen)
        spec = expected_outputs(task, args)
        ref = task.reference(*args)
        out = run_checked(task, fn, args, candidate, spec, device)
        ok, detail, err = compare(task, out, ref, dtype)
        worst = max(worst, err)
        if not ok:
            return CorrectnessReport(False, f"batch={batch}: {detail}", trial + 1, worst)
    return CorrectnessReport(True, "", len(batches), worst)
