"""Dynamic BI validation (SPEC §4).

Fix a target sample (plus a few *witness* samples, which add evidence at no
extra batch cost); run each alone at batch 1, twice, to get its reference bits
and expose run-to-run nondeterminism; then run them inside every context the
task admits, with fresh batchmates, and compare bitwise. Stop at the first
mismatch. Finally repeat the largest context on identical inputs, which
catches atomics whose order changes from run to run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nodice.gate.execute import expected_outputs, run_checked
from nodice.gate.result import Mismatch
from nodice.tasks.base import BIContext, Problem, Sample, Task


@dataclass
class DynamicReport:
    mismatch: Mismatch | None
    contexts_run: int
    kernel_calls: int
    kernel_ms: float
    contexts: list[str] = field(default_factory=list)


def bitwise_diff(expected: torch.Tensor, got: torch.Tensor) -> tuple[int, list[int]] | None:
    """Count of differing elements and the first one's index, comparing raw bits (NaN-safe)."""
    if expected.shape != got.shape:
        return expected.numel(), []
    e = expected.detach().contiguous().cpu()
    g = got.detach().contiguous().cpu()
    if e.dtype.is_floating_point:
        int_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[e.element_size()]
        e, g = e.view(int_dtype), g.view(int_dtype)
    diff = e != g
    if not bool(diff.any()):
        return None
    first = torch.nonzero(diff)[0]
    return int(diff.sum()), [int(i) for i in first]


def _scalar(t: torch.Tensor, index: list[int]) -> float:
    v = t[tuple(index)].item() if index else float("nan")
    return float(v)


class _Runner:
    def __init__(self, task: Task, fn: Callable[..., Any], candidate: Path, device: torch.device):
        self.task, self.fn, self.candidate, self.device = task, fn, candidate, device
        self.calls = 0
        self.kernel_ms = 0.0

    def run(
        self,
        problem: Problem,
        samples: list[Sample],
        gen: torch.Generator,
        args: tuple[Any, ...] | None = None,
    ) -> tuple[tuple[Any, ...], Any]:
        if args is None:
            args = self.task.compose(problem, samples, gen)
        spec = expected_outputs(self.task, args)
        t0 = time.perf_counter()
        out = run_checked(self.task, self.fn, args, self.candidate, spec, self.device)
        self.kernel_ms += (time.perf_counter() - t0) * 1e3
        self.calls += 1
        return args, out


def _compare(
    task: Task,
    label: str,
    ctx: dict[str, Any],
    expected: tuple[torch.Tensor, ...],
    got: tuple[torch.Tensor, ...],
) -> Mismatch | None:
    for name, e, g in zip(task.output_names, expected, got, strict=True):
        diff = bitwise_diff(e, g)
        if diff is not None:
            n, idx = diff
            return Mismatch(ctx, label, name, idx, _scalar(e, idx), _scalar(g, idx), n, e.numel())
    return None


def validate(
    task: Task,
    fn: Callable[..., Any],
    candidate: Path,
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    contexts: list[BIContext] | None = None,
) -> DynamicReport:
    runner = _Runner(task, fn, candidate, device)
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, device, dtype)
    contexts = task.contexts(device) if contexts is None else contexts
    n_witness = task.witnesses(device)
    targets = [task.sample(problem, gen) for _ in range(1 + n_witness)]
    labels = ["target"] + [f"witness {i}" for i in range(1, n_witness + 1)]
    done: list[str] = []

    def report(m: Mismatch | None) -> DynamicReport:
        return DynamicReport(m, len(done), runner.calls, runner.kernel_ms, done)

    # Batch 1, twice: the reference bits, and whether the kernel is deterministic at all.
    alone: list[tuple[torch.Tensor, ...]] = []
    for label, s in zip(labels, targets, strict=True):
        _, out = runner.run(problem, [s], gen)
        bits = tuple(t.clone() for t in task.select(out, 0))
        _, again = runner.run(problem, [s], gen)
        rerun = {"name": "batch=1,rerun", "batch_size": 1, "position": 0}
        m = _compare(task, label, rerun, bits, task.select(again, 0))
        if m is not None:
            done.append("batch=1,rerun")
            return report(m)
        alone.append(bits)
    done.append("batch=1,rerun")

    largest: tuple[BIContext, tuple[Any, ...], dict[int, int]] | None = None
    for ctx in contexts:
        b = ctx.batch_size
        pos = ctx.resolved_position()
        # Witnesses go to distinct random slots other than the target's.
        free = [i for i in range(b) if i != pos]
        perm = torch.randperm(len(free), generator=gen).tolist()
        slots = {0: pos}
        for w in range(1, min(n_witness, len(free)) + 1):
            slots[w] = free[perm[w - 1]]
        by_slot = {slot: t for t, slot in slots.items()}
        samples = [
            targets[by_slot[i]] if i in by_slot else task.sample(problem, gen, **ctx.params) for i in range(b)
        ]
        args, out = runner.run(problem, samples, gen)
        done.append(ctx.name)
        for t, slot in slots.items():
            m = _compare(
                task, labels[t], ctx.describe() | {"position": slot}, alone[t], task.select(out, slot)
            )
            if m is not None:
                return report(m)
        if largest is None or b > largest[0].batch_size:
            largest = (ctx, args, slots)

    if largest is not None:
        # The same batch again, bit for bit: atomics and racy reductions show up here.
        big, args, slots = largest
        _, out1 = runner.run(problem, [], gen, args=args)
        _, out2 = runner.run(problem, [], gen, args=args)
        name = f"{big.name},rerun"
        done.append(name)
        for t, slot in slots.items():
            m = _compare(
                task,
                labels[t],
                big.describe() | {"name": name, "position": slot},
                task.select(out1, slot),
                task.select(out2, slot),
            )
            if m is not None:
                return report(m)
    return report(None)
