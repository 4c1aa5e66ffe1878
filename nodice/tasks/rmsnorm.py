"""RMSNorm: ``y = x · rsqrt(mean(x²) + eps) · weight``, one row is one sample."""

from __future__ import annotations

from typing import Any

import torch

from nodice.tasks._scratch import row_chunks
from nodice.tasks.base import (
    BIContext,
    Problem,
    Sample,
    Task,
    Workload,
    element_size,
    place_rows,
    randn,
)

# Hidden sizes of real models (Llama-3-8B/70B, Qwen3-8B/30B-A3B).
_WORKLOADS = [
    Workload("llama3-8b-decode", {"B": 128, "H": 4096}, "Llama-3-8B"),
    Workload("llama3-8b-prefill", {"B": 8192, "H": 4096}, "Llama-3-8B"),
    Workload("qwen3-30b-a3b-prefill", {"B": 16384, "H": 2048}, "Qwen3-30B-A3B"),
    Workload("llama3-70b-prefill", {"B": 4096, "H": 8192}, "Llama-3-70B"),
]

# fp32 values a reference holds per element of a row: the row, its square, the normalised
# and the weighted row.
_FP32_PER_ELEMENT = 4


def rms_norm_fp32(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x·rsqrt(mean(x²)+eps)·weight`` over the last axis, in fp32."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return xf * rstd * weight.float()


def reference_row_chunks(x: torch.Tensor) -> list[slice]:
    """Rows of ``x[B, H]`` a row-wise reference takes at a time (rows are independent)."""
    return row_chunks(x.shape[0], _FP32_PER_ELEMENT * 4 * x.shape[-1])


# The problem-shape sweep: a narrow hidden size, so that the batch's elements (B·H: 192 … 4160 on
# CPU, 128 … 16448 on GPU) cross powers of two between these batches, which the real hidden
# size (1024 / 4096 elements per row) is past at batch 1.
_SWEEP_HIDDEN = 64
_SWEEP_SIZES = {"cpu": [3, 17, 33, 65], "cuda": [2, 9, 33, 65, 257]}


def _batch_contexts(device: torch.device) -> list[BIContext]:
    """Batch sizes that cross the usual heuristics (SM count, powers of two, small-batch paths)."""
    sizes = [2, 3, 8, 17, 64] if device.type == "cpu" else [2, 3, 8, 31, 64, 132, 257, 1024]
    out: list[BIContext] = []
    for b in sizes:
        for pos, label in ((0, "first"), (b // 2, "middle"), (-1, "last")):
            out.append(BIContext(f"batch={b},{label}", b, pos))
    for b in _SWEEP_SIZES.get(device.type, _SWEEP_SIZES["cuda"]):
        out.append(
            BIContext(f"H={_SWEEP_HIDDEN},batch={b},middle", b, b // 2, {"variant": {"H": _SWEEP_HIDDEN}})
        )
    return out


class RowwiseTask(Task):
    """Shared machinery of row-wise normalisations: a sample is one row of ``[B, H]``."""

    sample_unit = "one row"
    family = "normalization"
    unit = "GB/s"

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """The layer's weight and ε; ``variant`` may pin the hidden size ``H`` (the shape sweep)."""
        hidden = int(variant.get("H") or (1024 if device.type == "cpu" else 4096))
        weight = randn((hidden,), gen, device, dtype, scale=0.1, shift=1.0)
        return Problem(device, dtype, {"H": hidden}, {"weight": weight, "eps": 1e-6})

    def contexts(self, device: torch.device) -> list[BIContext]:
        return _batch_contexts(device)

    def witnesses(self, device: torch.device) -> int:
        # A re-ordered sum of squares moves rstd (and with it the whole row) in only about one
        # row in seven: 16 tracked rows let a violation through in ~1 run of 10, 64 in ~1 of
        # 10^4. Batch-1 calls of one row are cheap, even under the interpreter.
        return 63

    def workloads(self) -> list[Workload]:
        return list(_WORKLOADS)

    def small_workloads(self) -> list[Workload]:
        return [Workload("cpu-small", {"B": 16, "H": 1024}), Workload("cpu-wide", {"B": 4, "H": 4096})]

    def flops(self, workload: Workload) -> float:
        b, h = workload.params["B"], workload.params["H"]
        return 4.0 * b * h


class RMSNorm(RowwiseTask):
    name = "rmsnorm"
    signature = "kernel(x[B,H] bf16, weight[H] bf16, eps: float) -> y[B,H] bf16"
    output_names = ("y",)
    arity = 3

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        # Activations of a residual stream: mostly O(1) with a few larger channels.
        x = randn((problem.dims["H"],), gen, problem.device, problem.dtype, scale=1.5)
        return Sample({"x": x})

    def _rows(self, problem: Problem, gen: torch.Generator, n: int) -> torch.Tensor:
        return randn((n, problem.dims["H"]), gen, problem.device, problem.dtype, scale=1.5)

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        return [Sample({"x": row}) for row in self._rows(problem, gen, n)]

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        x = torch.stack([s.tensors["x"] for s in samples]).contiguous()
        return (x, problem.shared["weight"], problem.shared["eps"])

    def compose_around(
        self, problem: Problem, gen: torch.Generator, size: int, placed: dict[int, Sample], **hints: Any
    ) -> tuple[Any, ...]:
        mates = self._rows(problem, gen, size - len(placed))
        x = place_rows(mates, {slot: s.tensors["x"] for slot, s in placed.items()})
        return (x, problem.shared["weight"], problem.shared["eps"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        x, weight, eps = args
        y = torch.empty_like(x)
        for rows in reference_row_chunks(x):
            y[rows] = rms_norm_fp32(x[rows], weight, eps).to(x.dtype)
        return y

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        b, h = workload.params["B"], workload.params["H"]
        x = randn((b, h), gen, device, dtype, scale=1.5)
        w = randn((h,), gen, device, dtype, scale=0.1, shift=1.0)
        return (x, w, 1e-6)

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        b, h = workload.params["B"], workload.params["H"]
        return float((2 * b * h + h) * element_size(dtype))


TASK = RMSNorm()
