"""Dynamic BI validation (SPEC §4).

Fix a target sample (plus a few *witness* samples, which add evidence at no
extra batch cost); run each alone at batch 1 to get its reference bits, the
target and the first witnesses twice, to expose run-to-run nondeterminism (a
witness that differs later is run alone again before it is reported, so that
nondeterminism is named as such); then run them inside every context the
task admits, with fresh batchmates, and compare bitwise. Stop at the first
mismatch. Finally repeat the largest context on identical inputs, which
catches atomics whose order changes from run to run.

``values`` (:data:`VALUE_SEARCH`) draws the inputs off the task's own
distribution, in the rounds that look for a side of a batch-dependent choice
that the task's inputs never take: the tracked samples through one map, their
batchmates through another, every float input of a sample alike.

A context may ask for its own problem variant (``params["variant"]``, e.g. a
head layout or causality that a whole batch shares): contexts are grouped by
variant, and each group gets ``task.problem(gen, device, dtype, **variant)``,
its own target and witnesses, and their batch-1 bits.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nodice.gate.execute import expected_outputs, run_checked
from nodice.gate.result import Mismatch
from nodice.tasks.base import BIContext, Problem, Sample, Task


@dataclass(frozen=True)
class Values:
    """Inputs drawn off the task's distribution: each float tensor of a tracked sample through
    ``tracked``, of a batchmate through ``mates`` (integer inputs, indices and lengths, as drawn)."""

    name: str
    tracked: Callable[[torch.Tensor], torch.Tensor]
    mates: Callable[[torch.Tensor], torch.Tensor]

    def remap(self, s: Sample, mate: bool) -> Sample:
        f = self.mates if mate else self.tracked
        return Sample({k: f(v) if v.is_floating_point() else v for k, v in s.tensors.items()}, s.meta)


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _scaled(t: torch.Tensor) -> torch.Tensor:
    return t * 65536.0


# A choice made from the values of the whole batch (an identity fast path when no element is
# negative, a half-precision path while the largest magnitude fits fp16, a sparse path when most
# of the batch is zero) takes one side for every
# batch the task's own inputs make: ``torch.rand`` inputs never hold a negative, ``randn`` inputs
# never only non-negatives. These maps put a tracked sample from one regime beside batchmates from
# the other; the tracked samples stay in their problem's domain (|x| of a non-negative input is the
# input), and a batchmate may hold any value: a batch-invariant kernel gives a sample the same bits
# whatever its batchmates hold.
VALUE_SEARCH = (
    Values("batchmates negated", _same, torch.neg),
    Values("tracked samples' magnitudes", torch.abs, _same),
    Values("batchmates scaled by 2^16", _same, _scaled),
    Values("batchmates zeroed", _same, torch.zeros_like),
)


@dataclass
class DynamicReport:
    mismatch: Mismatch | None
    contexts_run: int
    kernel_calls: int
    kernel_ms: float
    contexts: list[str] = field(default_factory=list)
    # Milliseconds spent building inputs, in kernel calls (the harness's checks around each call
    # included), selecting the tracked samples' outputs and comparing them (see ``PHASES``).
    phases: dict[str, float] = field(default_factory=dict)


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
    """The element at ``index`` (a sample's output may be one number: a 0-d tensor, index [])."""
    if index or t.dim() == 0:
        return float(t[tuple(index)].item())
    return float("nan")


# Where the time goes on a GPU. Two batch-1 calls per tracked sample and one call per context (for
# rmsnorm about 290 calls per dtype), each with a few launches of the gate's own (the batch's stack,
# the allocator's poison, the batch-1 output's copy) and one host synchronisation (``call_kernel``
# waits for the kernel, so that a crash is reported as the candidate's, at its call). Everything
# else stays on the device: a context's tracked outputs are compared with their batch-1 bits as one
# flat byte buffer (one ``torch.equal``, one synchronisation), the batch-1 side of it packed once per
# problem, and the per-sample work of a mismatch report (``.cpu()``, ``nonzero``, ``.item()``) runs
# only once a context is known to differ. Nothing scales with the batch in host work either: a task
# whose batch is rows places a context's rows with one index (``Task.compose_around``), and a task
# whose samples sit on the outputs' first axis gives up the tracked ones with one indexing op per
# output (``Task.select_stacked``), not a view per row. On CPU little of this shows; on CUDA each tiny
# op is a launch (~5 µs) and each read of a device value a round trip (~10-20 µs).

# Tracked samples run twice alone at batch 1 (the target and the first witnesses): a second run
# that differs from the first is run-to-run nondeterminism (float atomics, racy reductions), which
# shows on any input, so a few samples expose it; the other witnesses run alone once, for their
# reference bits (on CUDA they are most of the stage's calls: 64 a problem for rmsnorm). A witness
# that later differs in a context is run alone again before the mismatch is reported, so that
# nondeterminism is still named as such.
RERUN_ALONE = 4

# Phases of the stage that ``DynamicReport.phases`` times (milliseconds; the rest is bookkeeping).
PHASES = ("inputs", "kernel", "select", "compare")


class _Runner:
    """The kernel under test, the batches built for it, and where the stage's time went."""

    def __init__(self, task: Task, fn: Callable[..., Any], candidate: Path, device: torch.device):
        self.task, self.fn, self.candidate, self.device = task, fn, candidate, device
        self.calls = 0
        self.kernel_ms = 0.0
        self.phases = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] += (time.perf_counter() - t0) * 1e3

    def run(
        self,
        problem: Problem,
        samples: list[Sample],
        gen: torch.Generator,
        args: tuple[Any, ...] | None = None,
    ) -> tuple[tuple[Any, ...], Any]:
        if args is None:
            with self.phase("inputs"):
                args = self.task.compose(problem, samples, gen)
        spec = expected_outputs(self.task, args)
        t0 = time.perf_counter()
        out = run_checked(self.task, self.fn, args, self.candidate, spec, self.device)
        ms = (time.perf_counter() - t0) * 1e3
        self.kernel_ms += ms
        self.phases["kernel"] += ms
        self.calls += 1
        return args, out

    def select(self, out: Any, slots: list[int], args: tuple[Any, ...]) -> _Packed:
        """The outputs of the samples at ``slots``, copied into one pack (a kernel may reuse its buffers)."""
        with self.phase("select"):
            stacked = self.task.select_stacked(out, slots, args)
            if stacked is not None:
                return _Packed.of_stacked(stacked)
            return _Packed.of(self.task.select_many(out, slots, args))


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


Layout = tuple[tuple[torch.Size, torch.dtype], ...]


def _layout(outs: tuple[torch.Tensor, ...]) -> Layout:
    return tuple((t.shape, t.dtype) for t in outs)


def _raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as their bytes, flat (a view when ``t`` is contiguous): equal bytes, equal bits."""
    return t.contiguous().view(-1).view(torch.uint8)


@dataclass
class _Packed:
    """Several samples' outputs packed into one flat byte tensor, sample by sample, output by output.

    Packing costs one launch (``torch.cat``); comparing two packs costs one more and a single host
    synchronisation, where comparing sample by sample would cost one per sample and output.
    """

    data: torch.Tensor
    layouts: list[Layout]
    ends: list[int]  # the byte where each sample's outputs end

    @classmethod
    def of(cls, outs: list[tuple[torch.Tensor, ...]]) -> _Packed:
        layouts = [_layout(o) for o in outs]
        ends, end = [], 0
        for o in outs:
            end += sum(t.numel() * t.element_size() for t in o)
            ends.append(end)
        return cls(torch.cat([_raw_bytes(t) for o in outs for t in o]), layouts, ends)

    @classmethod
    def of_stacked(cls, outs: tuple[torch.Tensor, ...]) -> _Packed:
        """Outputs stacked on a first axis (``Task.select_stacked``), packed with one copy at most."""
        n = len(outs[0])
        # Each output as ``[n, its bytes per sample]``: side by side, they are the samples in order.
        rows = [t.reshape(n, t.numel() // n).view(torch.uint8) for t in outs]
        data = rows[0] if len(rows) == 1 else torch.cat(rows, dim=1)
        layout = tuple((t.shape[1:], t.dtype) for t in outs)
        return cls(data.view(-1), [layout] * n, [data.shape[1] * (i + 1) for i in range(n)])

    @classmethod
    def join(cls, packs: list[_Packed]) -> _Packed:
        """Several packs as one, their samples in order."""
        ends, offset = [], 0
        for p in packs:
            ends += [offset + e for e in p.ends]
            offset += p.ends[-1] if p.ends else 0
        return cls(torch.cat([p.data for p in packs]), [lay for p in packs for lay in p.layouts], ends)

    def prefix(self, n: int) -> torch.Tensor:
        """The bytes of the first ``n`` samples (a view)."""
        return self.data[: self.ends[n - 1]]

    def sample(self, i: int) -> tuple[torch.Tensor, ...]:
        """Sample ``i``'s outputs again, with their shapes and dtypes (copies: for a mismatch report)."""
        start = self.ends[i - 1] if i else 0
        out = []
        for shape, dtype in self.layouts[i]:
            size = shape.numel() * dtype.itemsize
            out.append(self.data[start : start + size].clone().view(dtype).reshape(shape))
            start += size
        return tuple(out)


def _first_mismatch(
    task: Task,
    tracked: list[tuple[str, dict[str, Any]]],
    expected: _Packed,
    got: _Packed,
) -> Mismatch | None:
    """Compare the tracked samples (the first ``len(tracked)`` of ``expected``) at once: one device
    sync; the first difference is located, sample by sample, only if there is one.

    Samples may differ in shape (the sequences of a ragged batch): they are compared as flat bytes,
    once every sample's shapes match their batch-1 shapes.
    """
    n = len(tracked)
    if got.layouts == expected.layouts[:n] and torch.equal(expected.prefix(n), got.data):
        return None
    for i, (label, ctx) in enumerate(tracked):
        m = _compare(task, label, ctx, expected.sample(i), got.sample(i))
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
    witnesses: int | None = None,
    values: Values | None = None,
) -> DynamicReport:
    """``witnesses``: at least that many witness samples (more evidence than the task's default);
    ``values``: inputs off the task's distribution (:data:`VALUE_SEARCH`)."""
    runner = _Runner(task, fn, candidate, device)
    gen = torch.Generator().manual_seed(seed)
    contexts = task.contexts(device) if contexts is None else contexts
    n_witness = max(task.witnesses(device), witnesses or 0)
    labels = ["target"] + [f"witness {i}" for i in range(1, n_witness + 1)]
    done: list[str] = []

    def report(m: Mismatch | None) -> DynamicReport:
        return DynamicReport(m, len(done), runner.calls, runner.kernel_ms, done, dict(runner.phases))

    largest: tuple[BIContext, tuple[Any, ...], dict[int, int]] | None = None
    for variant, group in _by_variant(contexts):
        with runner.phase("inputs"):
            problem = task.problem(gen, device, dtype, **variant)
            targets = task.samples(problem, gen, 1 + n_witness)
            if values is not None:
                targets = [values.remap(t, mate=False) for t in targets]
        # Batch 1, twice: the reference bits, and whether the kernel is deterministic at all.
        alone: list[_Packed] = []
        again: list[_Packed] = []
        rerun: dict[str, Any] = {"name": "batch=1,rerun", "batch_size": 1, "position": 0}
        if variant:
            rerun["variant"] = variant
        if values is not None:
            rerun["inputs"] = values.name
        for i, s in enumerate(targets):
            for outputs in (alone, again) if i < RERUN_ALONE else (alone,):
                args, out = runner.run(problem, [s], gen)
                outputs.append(runner.select(out, [0], args))
        done.append("batch=1,rerun")
        with runner.phase("compare"):
            reference = _Packed.join(alone)
            reran = [(label, rerun) for label in labels[: len(again)]]
            m = _first_mismatch(task, reran, reference, _Packed.join(again))
        if m is not None:
            return report(m)
        del alone, again
        found = _run_contexts(
            task, runner, problem, gen, group, targets, reference, labels, done, rerun, values
        )
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
        first, second = (runner.select(out, list(slots.values()), args) for out in (out1, out2))
        with runner.phase("compare"):
            where = big.describe() | {"name": name} | ({"inputs": values.name} if values else {})
            m = _first_mismatch(
                task, [(labels[t], where | {"position": slot}) for t, slot in slots.items()], first, second
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
    reference: _Packed,
    labels: list[str],
    done: list[str],
    rerun: dict[str, Any],
    values: Values | None = None,
) -> Mismatch | tuple[BIContext, tuple[Any, ...], dict[int, int]] | None:
    """Run one problem's contexts: the first mismatch, else the largest context's batch for the rerun.

    ``reference`` holds the targets' batch-1 outputs in target order; a context tracks the target and
    its first witnesses, so their reference is a prefix of it. A tracked sample that differs and was
    not run twice alone is run alone again first: if that differs from its reference too, the kernel
    is nondeterministic at batch 1, and the mismatch is reported there (``rerun``), not as the
    context's.
    """
    n_witness = len(targets) - 1
    largest: tuple[BIContext, tuple[Any, ...], dict[int, int]] | None = None
    for ctx in contexts:
        b = ctx.batch_size
        pos = ctx.resolved_position()
        with runner.phase("inputs"):
            # Witnesses go to distinct random slots other than the target's.
            free = [i for i in range(b) if i != pos]
            perm = torch.randperm(len(free), generator=gen).tolist()
            slots = {0: pos}
            for w in range(1, min(n_witness, len(free)) + 1):
                slots[w] = free[perm[w - 1]]
            placed = {slot: targets[t] for t, slot in slots.items()}
            if values is not None:
                # The batchmates drawn here and mapped, then placed like the tracked samples.
                mates = iter(task.samples(problem, gen, b - len(placed), **ctx.params))
                placed = {
                    i: placed[i] if i in placed else values.remap(next(mates), mate=True) for i in range(b)
                }
            args = task.compose_around(problem, gen, b, placed, **ctx.params)
        args, out = runner.run(problem, [], gen, args=args)
        done.append(ctx.name)
        got = runner.select(out, list(slots.values()), args)
        with runner.phase("compare"):
            where = ctx.describe() | ({"inputs": values.name} if values else {})
            m = _first_mismatch(
                task, [(labels[t], where | {"position": slot}) for t, slot in slots.items()], reference, got
            )
        if m is not None:
            t = labels.index(m.sample)
            if t >= RERUN_ALONE:
                alone_args, out = runner.run(problem, [targets[t]], gen)
                again = runner.select(out, [0], alone_args)
                with runner.phase("compare"):
                    nondeterministic = _compare(task, m.sample, rerun, reference.sample(t), again.sample(0))
                return nondeterministic or m
            return m
        if largest is None or b > largest[0].batch_size:
            largest = (ctx, args, slots)
    return largest
