"""Brute-force batch-invariance oracle: the ground truth the detector benchmark scores the gate against.

It shares nothing with the gate's dynamic stage but the task definition (how a
sample is made, how samples form a batch, the reference) and the platform
set-up (Triton's interpreter with its deterministic ``tl.dot`` on CPU). Where
the dynamic stage samples a handful of contexts and stops at the first
mismatch, the oracle sweeps: every batch size ``1..max_batch`` (plus a few
larger ones), each as a batch of distinct samples in random order, for
several seeds and every problem variant the task admits; every slot of every
batch is compared bit for bit with that sample's batch-1 output, batch-1 runs
are repeated, and on GPU whole batches are repeated too (atomics).

Label: ``violating`` when any bit differs anywhere, ``invariant`` when none
does after the whole sweep, ``excluded`` when the candidate cannot be
classified (it fails to load, crashes, is incorrect, or its mechanism cannot
show on this device at all).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from nodice.bench.detector.pool import OracleLabel
from nodice.errors import NodiceError
from nodice.gate.correctness import check_correctness, compare
from nodice.gate.runtime import prepare, resolve_device
from nodice.loader import load_candidate
from nodice.tasks import get_task
from nodice.tasks.base import Problem, Sample, Task

# Seeds of the oracle's own random streams; far from the small seeds the benchmark gives the gate.
ORACLE_SEED = 424_242


@dataclass(frozen=True)
class OracleConfig:
    max_batch: int  # every batch size 1..max_batch is run
    extra_batches: tuple[int, ...]  # and these larger ones
    seeds: int  # independent sweeps, each with fresh samples (and the next problem variant)
    repeats: int  # runs of every batch-1 input
    batch_repeats: int  # runs of every multi-sample batch
    # Distinct samples per seed, each batch drawing its members at random: a reordered reduction
    # flips only some samples' bits, so many different samples matter as much as many batches.
    samples_per_seed: int = 48
    correctness_seeds: int = 2

    def batch_sizes(self) -> list[int]:
        return list(range(1, self.max_batch + 1)) + [b for b in self.extra_batches if b > self.max_batch]


# Batch sizes swept per task. On CPU every size up to N (the pool's candidates put their batch
# thresholds inside it; tasks whose samples are slow under the interpreter get a shorter sweep).
# On GPU every size up to N plus sizes around the usual heuristics (SM count 132, powers of two).
_CPU_SWEEP = {
    "gemm": 12,
    "attention_prefill": 6,
    "attention_decode": 6,
    "attention_varlen": 6,
    "dsa": 6,
    "mla_decode": 6,
    "moe": 10,
    "gdn": 6,
    "kda": 6,
    "sampling": 10,
}
# ... and a few larger ones around the thresholds candidates written elsewhere use (powers of two and
# one past them, 24, 40): a pool whose author never saw this sweep put thresholds at M=17 and beyond.
_CPU_EXTRA: dict[str, tuple[int, ...]] = {
    "rmsnorm": (17, 24, 32, 33, 40),
    "add_rmsnorm": (17, 24, 32, 33, 40),
    "layernorm": (17, 24, 32, 33, 40),
    "gemm": (16, 17, 24, 32, 33, 40, 64, 65),
    "moe": (16, 17, 24, 32, 33, 40),
    "sampling": (16, 17, 32, 33, 40),
    "attention_prefill": (8, 9, 16, 17),
    "attention_decode": (8, 9, 16, 17),
    "attention_varlen": (8, 9, 16, 17, 33),
    "dsa": (8, 9, 16, 17, 34),
    "mla_decode": (8, 9, 16, 17),
    "gdn": (8, 9, 16, 17),
    "kda": (8, 9, 16, 17),
}
_GPU_SWEEP: dict[str, tuple[int, tuple[int, ...]]] = {
    "rmsnorm": (64, (96, 128, 131, 132, 133, 256, 257, 512, 1024)),
    "add_rmsnorm": (64, (96, 128, 131, 132, 133, 256, 257, 512, 1024)),
    "layernorm": (64, (96, 128, 131, 132, 133, 256, 257, 512, 1024)),
    "gemm": (64, (96, 127, 128, 129, 132, 256, 257, 512, 1024)),
    "attention_prefill": (24, (32, 33)),
    "attention_decode": (48, (64, 96, 128, 132)),
    "attention_varlen": (24, (32, 33, 64, 132)),
    "dsa": (24, (32, 33, 64, 132, 133)),
    "mla_decode": (48, (64, 96, 128, 132)),
    "moe": (64, (96, 128, 256, 512)),
    "sampling": (64, (128, 132, 256)),
    "gdn": (16, (24, 32)),
    "kda": (16, (24, 32)),
}


def config_for(device: str, task: str) -> OracleConfig:
    if device == "cpu":
        n = _CPU_SWEEP.get(task, 16)
        # The interpreter runs programs one after another, deterministically: no reruns on CPU.
        # Batches beyond the 2·n samples drawn per seed repeat samples: identical rows are a batch too.
        extra = _CPU_EXTRA.get(task, ())
        return OracleConfig(n, extra, seeds=3, repeats=1, batch_repeats=1, samples_per_seed=2 * n)
    n, extra = _GPU_SWEEP.get(task, (64, ()))
    return OracleConfig(n, extra, seeds=3, repeats=2, batch_repeats=2, samples_per_seed=2 * n)


@dataclass
class Difference:
    """The first bitwise difference the sweep found."""

    dtype: str
    seed: int
    variant: dict[str, Any]
    batch_size: int
    position: int
    output: str
    index: list[int]
    expected: float
    got: float
    differing: int
    kind: str  # "batch" (inside a batch vs alone) or "rerun" (same input, different bits)


@dataclass
class Sweep:
    device: str
    dtypes: list[str]
    batch_sizes: list[int]
    seeds: int
    variants: list[dict[str, Any]]
    kernel_calls: int = 0
    slots_compared: int = 0
    first_difference: Difference | None = None
    violating_batch_sizes: list[int] = field(default_factory=list)
    skipped_dtypes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of ``t`` as integers, on its own device (NaN-safe, -0.0 ≠ 0.0)."""
    t = t.detach().contiguous()
    if t.dtype.is_floating_point:
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def differing_slots(
    expected: list[tuple[torch.Tensor, ...]], got: list[tuple[torch.Tensor, ...]]
) -> list[int]:
    """Slots whose outputs differ from the expected bits in any element, in slot order.

    The slots of one batch are compared in one stacked operation: one device sync per batch, not
    one per slot (a GPU sweep compares tens of thousands of slots).
    """
    bad: set[int] = set()
    for k in range(len(expected[0])):
        try:
            e = torch.stack([_bits(x[k]) for x in expected])
            g = torch.stack([_bits(x[k]) for x in got])
        except RuntimeError:  # shapes differ between slots: compare them one by one
            bad |= {s for s, (x, y) in enumerate(zip(expected, got, strict=True)) if _differs(x[k], y[k])}
            continue
        if e.shape != g.shape:
            bad |= set(range(len(expected)))
            continue
        bad |= set(torch.nonzero((e != g).reshape(len(expected), -1).any(dim=1)).flatten().tolist())
    return sorted(bad)


def _differs(e: torch.Tensor, g: torch.Tensor) -> bool:
    return e.shape != g.shape or bool((_bits(e) != _bits(g)).any())


def first_bit_difference(
    expected: tuple[torch.Tensor, ...], got: tuple[torch.Tensor, ...], names: tuple[str, ...]
) -> tuple[str, list[int], float, float, int] | None:
    """(output, index, expected, got, count) of the first differing element, comparing raw bits."""
    for name, e, g in zip(names, expected, got, strict=True):
        if e.shape != g.shape:
            return name, [], float("nan"), float("nan"), e.numel()
        diff = (_bits(e) != _bits(g)).cpu()
        if bool(diff.any()):
            idx = [int(i) for i in torch.nonzero(diff)[0]]
            return name, idx, float(e[tuple(idx)].item()), float(g[tuple(idx)].item()), int(diff.sum())
    return None


def _variants(task: Task, device: torch.device) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Problem variants the task's contexts ask for, each with the sample hints they use."""
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for ctx in task.contexts(device):
        variant = dict(ctx.params.get("variant") or {})
        hints = {k: v for k, v in ctx.params.items() if k != "variant"}
        _, seen = groups.setdefault(repr(sorted(variant.items())), (variant, []))
        if hints not in seen:
            seen.append(hints)
    return [(v, h or [{}]) for v, h in groups.values()] or [({}, [{}])]


class _Sweeper:
    def __init__(self, task: Task, fn: Callable[..., Any], device: torch.device, dtype: torch.dtype):
        self.task, self.fn, self.device, self.dtype = task, fn, device, dtype
        self.calls = 0

    def run(self, args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        out = self.fn(*args)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.calls += 1
        return out if isinstance(out, tuple) else (out,)

    def selected(
        self, outs: tuple[torch.Tensor, ...], slot: int, args: tuple[Any, ...], clone: bool = True
    ) -> tuple[torch.Tensor, ...]:
        packed = outs if len(outs) > 1 else outs[0]
        return tuple(t.clone() if clone else t for t in self.task.select(packed, slot, args))


def _sweep_seed(
    sw: _Sweeper, cfg: OracleConfig, si: int, variant: dict[str, Any], hints: list[dict[str, Any]], rec: Sweep
) -> None:
    task = sw.task
    gen = torch.Generator().manual_seed(ORACLE_SEED + si)
    problem: Problem = (
        task.problem(gen, sw.device, sw.dtype, **variant)
        if variant
        else task.problem(gen, sw.device, sw.dtype)
    )
    sizes = cfg.batch_sizes()
    n_samples = cfg.samples_per_seed
    samples: list[Sample] = [task.sample(problem, gen, **hints[i % len(hints)]) for i in range(n_samples)]
    alone: dict[int, tuple[torch.Tensor, ...]] = {}

    def note(b: int, slot: int, kind: str, diff: tuple[str, list[int], float, float, int]) -> None:
        if b not in rec.violating_batch_sizes:
            rec.violating_batch_sizes.append(b)
        if rec.first_difference is None:
            rec.first_difference = Difference(_name(sw.dtype), si, variant, b, slot, *diff, kind=kind)

    def alone_bits(i: int) -> tuple[torch.Tensor, ...]:
        if i not in alone:
            args = task.compose(problem, [samples[i]], gen)
            alone[i] = sw.selected(sw.run(args), 0, args)
            for _ in range(cfg.repeats - 1):
                d = first_bit_difference(alone[i], sw.selected(sw.run(args), 0, args), task.output_names)
                if d is not None:
                    note(1, 0, "rerun", d)
        return alone[i]

    for b in sizes:
        if b <= len(samples):
            order = torch.randperm(len(samples), generator=gen)[:b].tolist()
        else:  # a batch larger than the pool repeats samples: identical rows are a batch too
            order = torch.randint(len(samples), (b,), generator=gen).tolist()
        args = task.compose(problem, [samples[i] for i in order], gen)
        for rep in range(cfg.batch_repeats if b > 1 else 1):
            outs = sw.run(args)
            if rep == 0 and not _has_own_correctness(task):
                ok, detail, _ = compare(
                    task, outs if len(outs) > 1 else outs[0], task.reference(*args), sw.dtype
                )
                if not ok:
                    raise _Incorrect(f"{_name(sw.dtype)} batch={b}: {detail}")
            expected = [alone_bits(i) for i in order]
            got = [sw.selected(outs, slot, args, clone=False) for slot in range(b)]
            rec.slots_compared += b
            for slot in differing_slots(expected, got):
                d = first_bit_difference(expected[slot], got[slot], task.output_names)
                if d is not None:
                    note(b, slot, "batch", d)


class _Incorrect(Exception):
    pass


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _has_own_correctness(task: Task) -> bool:
    """Tasks judged by their own rule (e.g. sampling's distribution) have no per-batch elementwise check."""
    return type(task).check_correctness is not Task.check_correctness


def _dtypes(task: Task, dev: torch.device) -> list[torch.dtype]:
    """The task's dtype, then the probe dtypes the gate also validates in (fp32 on GPU)."""
    main = task.dtype_for(dev)
    return [main] + [d for d in task.probe_dtypes(dev) if d != main]


def _judge_in(
    dtype: torch.dtype,
    task: Task,
    fn: Callable[..., Any],
    path: Path,
    dev: torch.device,
    cfg: OracleConfig,
    variants: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    rec: Sweep,
) -> str | None:
    """Correctness, then the sweep, in one dtype: why the candidate cannot be judged in it, or None."""
    for s in range(cfg.correctness_seeds):
        rep = check_correctness(task, fn, path, dev, dtype, ORACLE_SEED + 1000 + s)
        if not rep.ok:
            return f"incorrect in {_name(dtype)}: {rep.detail}"
    sw = _Sweeper(task, fn, dev, dtype)
    for si in range(cfg.seeds):
        variant, hints = variants[si % len(variants)]
        _sweep_seed(sw, cfg, si, variant, hints, rec)
        if rec.first_difference is not None:
            break  # this seed's sweep is complete: its violating batch sizes are the evidence
    rec.kernel_calls += sw.calls
    return None


def _excluded(reason: str, evidence: dict[str, Any] | None = None) -> OracleLabel:
    return OracleLabel("excluded", reason[:400], evidence or {})


def label_candidate(
    path: str | Path,
    task_name: str,
    device: str = "cpu",
    observable_on: tuple[str, ...] = ("cpu", "cuda"),
    config: OracleConfig | None = None,
) -> OracleLabel:
    """Sweep one candidate and label it. Never raises for a bad candidate: it is excluded instead."""
    t0 = time.perf_counter()
    dev = resolve_device(device)
    prepare(dev)
    task = get_task(task_name)
    cfg = config or config_for(dev.type, task_name)
    variants = _variants(task, dev)
    rec = Sweep(dev.type, [], cfg.batch_sizes(), cfg.seeds, [v for v, _ in variants])
    try:
        cand = load_candidate(path, "kernel", task.arity)
    except NodiceError as exc:
        return _excluded(exc.line())
    for n, dtype in enumerate(_dtypes(task, dev)):
        try:
            problem = _judge_in(dtype, task, cand.fn, cand.path, dev, cfg, variants, rec)
        except NodiceError as exc:
            problem = exc.line()
        except _Incorrect as exc:
            problem = f"incorrect: {exc}"
        except Exception as exc:  # the candidate's own failure inside the sweep
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            problem = f"crashed: {type(exc).__name__}: {msg}"
        if problem is None:
            rec.dtypes.append(_name(dtype))
        elif n == 0:
            return _excluded(problem)
        else:  # a probe dtype the kernel does not support is skipped, as the gate skips it
            rec.skipped_dtypes[_name(dtype)] = problem[:200]
        if rec.first_difference is not None:
            break
    rec.seconds = round(time.perf_counter() - t0, 2)
    rec.violating_batch_sizes.sort()
    evidence = asdict(rec)
    if rec.first_difference is not None:
        d = rec.first_difference
        return OracleLabel(
            "violating",
            f"{d.kind} difference in {d.dtype} at batch={d.batch_size}, position={d.position}",
            evidence,
        )
    if dev.type not in observable_on:
        # No difference is no evidence when the mechanism cannot act on this device.
        return _excluded(
            f"no difference on {dev.type}, where this candidate's mechanism cannot act "
            "(e.g. float atomics add in a fixed order there); labeled on "
            + ", ".join(observable_on)
            + " only",
            evidence,
        )
    return OracleLabel("invariant", f"no bit differs in {rec.slots_compared} compared slots", evidence)


def oracle_job(path: str, task: str, device: str, observable_on: list[str]) -> dict[str, Any]:
    """Worker entry point: one candidate's label as plain data."""
    return asdict(label_candidate(path, task, device, tuple(observable_on)))
