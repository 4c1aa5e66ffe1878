"""The task API: what a task owns so that the gate can judge a kernel for it.

A task knows how to make one *sample* (the unit that must be batch-invariant),
how to compose samples into a batch at chosen positions, the reference, the
correctness rule, the batch contexts worth trying, and the workloads it is
benchmarked on. The gate is written against this interface only.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

Output = torch.Tensor | tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Workload:
    """A benchmark shape taken from a real model."""

    name: str
    params: dict[str, Any]
    model: str = ""


@dataclass(frozen=True)
class BIContext:
    """One batch in which the target sample is run and compared with its batch-1 output.

    ``position`` may be negative (counted from the end). ``params`` carries
    family-specific knobs (batchmate lengths, page placement, routing bias …).
    """

    name: str
    batch_size: int
    position: int = 0
    params: dict[str, Any] = field(default_factory=dict)

    def resolved_position(self) -> int:
        return self.position % self.batch_size

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "batch_size": self.batch_size,
            "position": self.resolved_position(),
            **self.params,
        }


@dataclass
class Problem:
    """Everything shared by the samples of one batch: sizes, weights, scalar arguments."""

    device: torch.device
    dtype: torch.dtype
    dims: dict[str, Any]
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass
class Sample:
    """One sample's own inputs (a row, a sequence, a request …)."""

    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass
class CorrectnessReport:
    """Verdict of the correctness stage: ``detail`` says what was wrong when ``ok`` is false."""

    ok: bool
    detail: str
    trials: int
    max_abs_err: float


# The kernel under test, called on one batch's arguments: allocations poisoned,
# the output checked against the task's shapes and dtypes, crashes typed.
KernelRun = Callable[[tuple[Any, ...]], Output]


# Tolerances against an fp32 reference, by the dtype the kernel computes in.
DEFAULT_TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4),
    torch.float16: Tolerance(atol=2e-3, rtol=2e-3),
    torch.bfloat16: Tolerance(atol=1.6e-2, rtol=1.6e-2),
}


class Task(ABC):
    """Base class of every task in the catalog."""

    name: str
    family: str
    signature: str
    sample_unit: str
    output_names: tuple[str, ...] = ("out",)
    # Number of positional arguments the kernel takes.
    arity: int
    # What a workload's score is measured in: "TFLOP/s" where arithmetic bounds the
    # operation (attention prefill, gemm, moe, linear attention), "GB/s" where moving
    # bytes does (norms, decode, sampling).
    unit: str = "TFLOP/s"
    # The symbol of the batch axis in ``signature`` when it is not the first dimension of the first
    # tensor (static analysis reads the batch sources from the signature).
    batch_symbol: str | None = None
    # Dynamic validation on CPU also runs in fp16 (see ``probe_dtypes``); off for tasks whose
    # inputs have no storage dtype to round to (sampling's fp32 logits).
    cpu_half_probe: bool = True
    # The catalog task whose contracts (subtypes included) apply, for a task built on another's batches
    # (a FlashInfer-Bench definition): its own name when None.
    contracts_of: str | None = None
    # Static rules every correct kernel of the task's interface triggers (a sampler with no per-request
    # seed continues one random stream): static analysis does not report them.
    inherent_rules: frozenset[str] = frozenset()
    # Outputs must be contiguous (SPEC §3): a strided view is a bad output. A KernelBench reference
    # compares values only, and its harness takes any strided layout: False there.
    contiguous_outputs: bool = True

    def init_values(self) -> tuple[Any, ...] | None:
        """The arguments a module entry point is constructed with (a KernelBench ``ModelNew`` gets
        ``get_init_inputs()``), for static analysis to read as constants; None when the task builds none."""
        return None

    # ---- the candidate's entry point ----------------------------------------
    def bind_entry(
        self, entry: Any, name: str, path: Path, device: torch.device, dtype: torch.dtype
    ) -> Callable[..., Any] | None:
        """The callable the gate runs, made from the candidate's entry point.

        ``None`` (the default) means the entry is the kernel itself, a function of the task's
        arguments. A task whose candidates define something else (a ``torch.nn.Module`` class)
        builds the callable here and raises :class:`nodice.errors.EntryPointError` when it cannot.
        """
        return None

    # ---- sizes and dtypes -------------------------------------------------
    def dtype_for(self, device: torch.device) -> torch.dtype:
        """bf16 on GPU; fp32 on CPU, where Triton's interpreter does not compute bf16."""
        return torch.bfloat16 if device.type == "cuda" else torch.float32

    def probe_dtypes(self, device: torch.device) -> list[torch.dtype]:
        """Extra dtypes dynamic validation tries after the task's own (when the kernel accepts them).

        bf16 outputs hide most reduction-order changes: a 1-ulp fp32 difference
        flips a bf16 output with probability ~2^-16. The same kernel fed fp32
        shows the order change in nearly every element, so on GPU a kernel that
        runs in fp32 is also validated in fp32.

        On CPU the task's dtype is fp32, and fp32 hides the opposite kind of change:
        where a kernel rounds to the storage dtype (a fused path normalising the
        unrounded fp32 sum against a path that re-reads the rounded residual, a
        statistic kept in a storage-dtype buffer) is invisible when the storage
        dtype is fp32 itself. Triton's interpreter computes fp16 exactly as the
        GPU does (bf16 not at all, triton-lang/triton#11584), so on CPU a kernel
        that runs in fp16 is also validated in fp16 (``cpu_half_probe``).
        """
        if device.type == "cuda":
            return [torch.float32]
        return [torch.float16] if self.cpu_half_probe else []

    # ---- samples and batches ----------------------------------------------
    @abstractmethod
    def problem(self, gen: torch.Generator, device: torch.device, dtype: torch.dtype) -> Problem:
        """Shared part of a batch, sized for ``device`` (small on CPU)."""

    @abstractmethod
    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """Fresh random inputs for one sample. ``hints`` carry context knobs (e.g. a length)."""

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        """``n`` fresh samples; tasks override this to draw them in one bulk call."""
        return [self.sample(problem, gen, **hints) for _ in range(n)]

    @abstractmethod
    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        """The kernel's positional arguments for a batch holding ``samples`` in that order."""

    def compose_around(
        self, problem: Problem, gen: torch.Generator, size: int, placed: dict[int, Sample], **hints: Any
    ) -> tuple[Any, ...]:
        """A batch of ``size``: the ``placed`` samples at their slots, fresh batchmates in the others.

        The batchmates are drawn with ``samples(problem, gen, size - len(placed), **hints)`` and fill
        the free slots in order. Tasks whose batch is rows of a few tensors override this to place
        every row with one indexing op (:func:`place_rows`), drawing exactly what ``samples`` draws.
        """
        mates = iter(self.samples(problem, gen, size - len(placed), **hints))
        return self.compose(problem, [placed[i] if i in placed else next(mates) for i in range(size)], gen)

    def select(
        self, output: Output, index: int, args: tuple[Any, ...] | None = None
    ) -> tuple[torch.Tensor, ...]:
        """The part of the output that belongs to sample ``index`` (one tensor per output).

        ``args`` are the batch's kernel arguments, for tasks whose samples have no fixed
        place in the output (a packed ragged batch finds a sequence's rows through its offsets).
        """
        outs = output if isinstance(output, tuple) else (output,)
        return tuple(o[index] for o in outs)

    def select_many(
        self, output: Output, indices: list[int], args: tuple[Any, ...] | None = None
    ) -> list[tuple[torch.Tensor, ...]]:
        """:meth:`select` for several samples of one batch, in the order of ``indices``.

        A task that finds its samples through data on the device (a ragged batch's offsets)
        overrides both, so that a batch's offsets are read once (one host synchronisation on a
        GPU) rather than once per sample.
        """
        return [self.select(output, i, args) for i in indices]

    def select_stacked(
        self, output: Output, indices: list[int], args: tuple[Any, ...] | None = None
    ) -> tuple[torch.Tensor, ...] | None:
        """The outputs of the samples at ``indices``, stacked on a new first axis (one tensor per output).

        One indexing op per output (a copy) instead of a view per sample and output. ``None`` where a
        task's samples have no fixed place on the outputs' first axis (it overrides :meth:`select`):
        the gate then takes them one by one with :meth:`select_many`.
        """
        if type(self).select is not Task.select:
            return None
        outs = output if isinstance(output, tuple) else (output,)
        start, stop = indices[0], indices[0] + len(indices)
        if indices == list(range(start, stop)):  # a run of slots (a batch of one): no index to copy
            return tuple(o[start:stop].clone() for o in outs)
        index = device_index(indices, outs[0].device)
        return tuple(o.index_select(0, index) for o in outs)

    # ---- reference and correctness -----------------------------------------
    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        """Shape and dtype of each output for ``args``; tasks override this with shape arithmetic.

        The default runs the reference, which is correct but costs a reference
        computation for every batch the gate builds.
        """
        ref = self.reference(*args)
        outs = ref if isinstance(ref, tuple) else (ref,)
        return [(o.shape, o.dtype) for o in outs]

    @abstractmethod
    def reference(self, *args: Any) -> Output:
        """Reference semantics, computed in fp32 and cast to the output dtype."""

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return DEFAULT_TOLERANCES[dtype]

    def precision_floor(self, dtype: torch.dtype) -> torch.dtype:
        """The coarsest precision of the reference's computation when the gate runs in ``dtype``: the
        anti-cheat guards cannot tell a kernel computing below it from the reference itself."""
        return dtype

    def input_label(self, index: int) -> str:
        """How a message names the kernel's argument ``index``."""
        return f"input argument {index}"

    def argument_names(self) -> list[str]:
        """The names of the kernel's arguments, from the signature string."""
        return signature_names(self.signature)

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 5, 16] if device.type == "cpu" else [1, 7, 64, 256]

    def check_correctness(
        self, run: KernelRun, device: torch.device, dtype: torch.dtype, seed: int
    ) -> CorrectnessReport | None:
        """A task's own correctness rule, for outputs that one tolerance cannot judge.

        Sampling, for instance, is judged by its distribution over many seeds.
        ``None`` (the default) means the generic rule: fresh batches compared
        elementwise with the reference within :meth:`tolerance`.
        """
        return None

    # ---- batch invariance ---------------------------------------------------
    @abstractmethod
    def contexts(self, device: torch.device) -> list[BIContext]:
        """Admissible batch contexts, CPU-sized or GPU-sized."""

    def threshold_contexts(self, device: torch.device, sizes: list[int]) -> list[BIContext]:
        """Contexts at batch sizes the candidate compares its batch against (``gate.thresholds``),
        beyond :meth:`contexts`; a task whose contexts are its own design adds none."""
        return []

    def sample_elements(self) -> list[int]:
        """Elements one sample holds in each batched input, for a candidate that compares an element
        count with a literal (``gate.thresholds``); none where :meth:`threshold_contexts` adds none."""
        return []

    def witnesses(self, device: torch.device) -> int:
        """Extra samples checked alongside the target in every context.

        A reduction-order change flips a given row's output bits only part of the
        time (about a third of rows for a re-tiled fp32 sum of squares), so more
        compared rows per batch make a violation's detection near-certain for the
        cost of a few batch-1 calls.
        """
        return 15 if device.type == "cpu" else 31

    # ---- performance ---------------------------------------------------------
    @abstractmethod
    def workloads(self) -> list[Workload]:
        """Benchmark shapes from real models."""

    def small_workloads(self) -> list[Workload]:
        """CPU-sized workloads (Triton interpreter), used to score candidates without a GPU."""
        return []

    def bench_workloads(self, device: torch.device) -> list[Workload]:
        return self.workloads() if device.type == "cuda" else self.small_workloads()

    @abstractmethod
    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        """The kernel's arguments for one workload."""

    @abstractmethod
    def flops(self, workload: Workload) -> float:
        """Useful floating-point operations of one call."""

    @abstractmethod
    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """Fewest bytes one call must move through device memory."""

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "signature": self.signature,
            "sample": self.sample_unit,
            "arity": self.arity,
            "unit": self.unit,
            "workloads": [{"name": w.name, "model": w.model, **w.params} for w in self.workloads()],
            # What a run on a CPU (Triton's interpreter) is scored on: `--workload` takes these there.
            "cpu_workloads": [{"name": w.name, **w.params} for w in self.small_workloads()],
        }


def signature_names(signature: str) -> list[str]:
    """Parameter names of a signature string (``kernel(x[B,H] bf16, eps: float) -> …``)."""
    inner = signature[signature.find("(") + 1 : signature.rfind(")")]
    depth, parts, cur = 0, [], ""
    for ch in inner:
        depth += 1 if ch in "[(" else -1 if ch in "])" else 0
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    names = [m.group(0) for p in parts if (m := re.match(r"\s*[A-Za-z_]\w*", p))]
    return [n.strip() for n in names]


def randn(
    shape: tuple[int, ...],
    gen: torch.Generator,
    device: torch.device,
    dtype: torch.dtype,
    scale: float = 1.0,
    shift: float = 0.0,
) -> torch.Tensor:
    """Normal random data (reproducible from ``gen``), never exactly zero."""
    g = device_generator(gen, device)
    t = torch.randn(shape, generator=g, device=device, dtype=torch.float32)
    # In place, and skipping a multiplication by one or an addition of zero: the same bits with
    # fewer launches and allocations (a zero's sign does not matter, zeros are replaced below).
    if scale != 1.0:
        t.mul_(scale)
    if shift != 0.0:
        t.add_(shift)
    # An exact zero hides unwritten outputs and wrong indexing: nudge it away.
    t.masked_fill_(t == 0, 1e-3)
    return t.to(dtype=dtype)


def device_generator(gen: torch.Generator, device: torch.device) -> torch.Generator:
    """A generator on ``device`` seeded from ``gen``: bulk data is drawn where it is used.

    Drawing GPU-sized batches on the CPU and copying them over would dominate the
    gate's run time; seeding from the CPU generator keeps every run reproducible.
    """
    if device.type == "cpu":
        return gen
    seed = int(torch.randint(0, 2**62, (1,), generator=gen).item())
    return torch.Generator(device=device).manual_seed(seed)


def device_index(indices: list[int], device: torch.device) -> torch.Tensor:
    """``indices`` as an int64 tensor on ``device``; the copy does not wait for the device's queue."""
    return torch.tensor(indices, dtype=torch.long).to(device, non_blocking=True)


def place_rows(mates: torch.Tensor, placed: dict[int, torch.Tensor]) -> torch.Tensor:
    """A batch of ``len(mates) + len(placed)`` rows: each ``placed`` row at its slot, ``mates`` in the
    other slots in order; what stacking the rows one by one gives, in a few ops whatever the batch."""
    size, n_placed = len(mates) + len(placed), len(placed)
    # Where each slot's row comes from in ``[placed rows..., mates...]``.
    source = torch.full((size,), -1, dtype=torch.long)
    source[list(placed)] = torch.arange(n_placed)
    source[source < 0] = torch.arange(n_placed, size)
    rows = torch.cat([torch.stack(list(placed.values())), mates]) if placed else mates
    return rows.index_select(0, source.to(rows.device, non_blocking=True))


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def geomean(values: list[float]) -> float:
    if not values or any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))
