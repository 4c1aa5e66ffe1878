"""Dynamic BI validation (SPEC §4).

Fix a target sample (plus a few *witness* samples, which add evidence at no
extra batch cost); run each alone at batch 1, twice, to get its reference bits
and expose run-to-run nondeterminism; then run them inside every context the
task admits, with fresh batchmates, and compare bitwise. Stop at the first
mismatch. Finally repeat the largest context on identical inputs, which
catches atomics whose order changes from run to run.

A context may ask for its own problem variant (``params["variant"]``, e.g. a
head layout or causality that a whole batch shares): contexts are grouped by
variant, and each group gets ``task.problem(gen, device, dtype, **variant)``,
its own target and witnesses, and their batch-1 bits.
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


def _bits(t: torch.Tensor) -> torch.Tensor:
    if not t.dtype.is_floating_point:
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _flat_bits(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([_bits(t.contiguous()).reshape(-1) for t in tensors])


def _first_mismatch(
    task: Task,
    tracked: list[tuple[str, dict[str, Any]]],
    expected: list[tuple[torch.Tensor, ...]],
    got: list[tuple[torch.Tensor, ...]],
) -> Mismatch | None:
    """Compare all tracked samples at once (one device sync); locate the first difference only if any.

    Samples may differ in shape (the sequences of a ragged batch): they are compared flattened
    and concatenated, once every sample's shapes match their batch-1 shapes.
    """
    same = all(
        all(e[k].shape == g[k].shape for e, g in zip(expected, got, strict=True))
        and torch.equal(_flat_bits([e[k] for e in expected]), _flat_bits([g[k] for g in got]))
        for k in range(len(task.output_names))
    )
    if same:
        return None
    for (label, ctx), e, g in zip(tracked, expected, got, strict=True):
        m = _compare(task, label, ctx, e, g)
        if m is not None:
            return m
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
    contexts = task.contexts(device) if contexts is None else contexts
    n_witness = task.witnesses(device)
    labels = ["target"] + [f"witness {i}" for i in range(1, n_witness + 1)]
    done: list[str] = []

    def report(m: Mismatch | None) -> DynamicReport:
        return DynamicReport(m, len(done), runner.calls, runner.kernel_ms, done)

    largest: tuple[BIContext, tuple[Any, ...], dict[int, int]] | None = None
    for variant, group in _by_variant(contexts):
        problem = task.problem(gen, device, dtype, **variant)
        targets = task.samples(problem, gen, 1 + n_witness)
        # Batch 1, twice: the reference bits, and whether the kernel is deterministic at all.
        alone: list[tuple[torch.Tensor, ...]] = []
        again: list[tuple[torch.Tensor, ...]] = []
        rerun: dict[str, Any] = {"name": "batch=1,rerun", "batch_size": 1, "position": 0}
        if variant:
            rerun["variant"] = variant
        for s in targets:
            args, out = runner.run(problem, [s], gen)
            alone.append(tuple(t.clone() for t in task.select(out, 0, args)))
            args, out = runner.run(problem, [s], gen)
            again.append(tuple(t.clone() for t in task.select(out, 0, args)))
        done.append("batch=1,rerun")
        m = _first_mismatch(task, [(label, rerun) for label in labels], alone, again)
        if m is not None:
            return report(m)
        found = _run_contexts(task, runner, problem, gen, group, targets, alone, labels, done)
        if isinstance(found, Mismatch):
            return report(found)
        if found is not None and (largest is None or found[0].batch_size > largest[0].batch_size):
            largest = found

    if largest is not None:
        # The same batch again, bit for bit: atomics and racy reductions show up here.
        big, args, slots = largest
        _, out1 = runner.run(problem, [], gen, args=args)
        _, out2 = runner.run(problem, [], gen, args=args)
        name = f"{big.name},rerun"
        done.append(name)
        m = _first_mismatch(
            task,
            [(labels[t], big.describe() | {"name": name, "position": slot}) for t, slot in slots.items()],
            [task.select(out1, slot, args) for slot in slots.values()],
            [task.select(out2, slot, args) for slot in slots.values()],
        )
        if m is not None:
            return report(m)
    return report(None)


def _by_variant(contexts: list[BIContext]) -> list[tuple[dict[str, Any], list[BIContext]]]:
    """Contexts grouped by the problem variant they ask for, in first-seen order (one group at least)."""
    groups: dict[str, tuple[dict[str, Any], list[BIContext]]] = {}
    for ctx in contexts:
        variant = dict(ctx.params.get("variant") or {})
        groups.setdefault(repr(sorted(variant.items())), (variant, []))[1].append(ctx)
    return list(groups.values()) or [({}, [])]


def _run_contexts(
    task: Task,
    runner: _Runner,
    problem: Problem,
    gen: torch.Generator,
    contexts: list[BIContext],
    targets: list[Sample],
    alone: list[tuple[torch.Tensor, ...]],
    labels: list[str],
    done: list[str],
) -> Mismatch | tuple[BIContext, tuple[Any, ...], dict[int, int]] | None:
    """Run one problem's contexts: the first mismatch, else the largest context's batch for the rerun."""
    n_witness = len(targets) - 1
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
        mates = iter(task.samples(problem, gen, b - len(slots), **ctx.params))
        samples = [targets[by_slot[i]] if i in by_slot else next(mates) for i in range(b)]
        args, out = runner.run(problem, samples, gen)
        done.append(ctx.name)
        m = _first_mismatch(
            task,
            [(labels[t], ctx.describe() | {"position": slot}) for t, slot in slots.items()],
            [alone[t] for t in slots],
            [task.select(out, slot, args) for slot in slots.values()],
        )
        if m is not None:
            return m
        if largest is None or b > largest[0].batch_size:
            largest = (ctx, args, slots)
    return largest
