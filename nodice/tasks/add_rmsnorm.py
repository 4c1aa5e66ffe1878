"""Fused residual add + RMSNorm, one row is one sample.

``residual_out = x + residual`` rounded to the io dtype (the value the next
layer's residual stream carries), then ``y = rmsnorm(residual_out)``: the
pre-norm step of every transformer block in Llama/Qwen-style models.
"""

from __future__ import annotations

from typing import Any

import torch

from nodice.tasks.base import Problem, Sample, Workload, element_size, place_rows, randn
from nodice.tasks.rmsnorm import RowwiseTask, reference_row_chunks, rms_norm_fp32

# Token counts of a decode step (a batch of requests) and of a prefill chunk, at
# the hidden sizes of Llama-3-8B/70B and Qwen3-8B/32B/30B-A3B.
_WORKLOADS = [
    Workload("llama3-8b-decode", {"B": 128, "H": 4096}, "Llama-3-8B"),
    Workload("llama3-8b-prefill", {"B": 8192, "H": 4096}, "Llama-3-8B"),
    Workload("qwen3-32b-decode", {"B": 256, "H": 5120}, "Qwen3-32B"),
    Workload("qwen3-32b-prefill", {"B": 4096, "H": 5120}, "Qwen3-32B"),
    Workload("qwen3-30b-a3b-prefill", {"B": 16384, "H": 2048}, "Qwen3-30B-A3B"),
    Workload("llama3-70b-prefill", {"B": 4096, "H": 8192}, "Llama-3-70B"),
]


class AddRMSNorm(RowwiseTask):
    name = "add_rmsnorm"
    signature = (
        "kernel(x[B,H] bf16, residual[B,H] bf16, weight[H] bf16, eps: float) "
        "-> (y[B,H] bf16, residual_out[B,H] bf16)"
    )
    output_names = ("y", "residual_out")
    arity = 4

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        h, dev, dt = problem.dims["H"], problem.device, problem.dtype
        # A sublayer's output is O(1); the residual stream it joins has grown larger.
        x = randn((h,), gen, dev, dt, scale=1.0)
        residual = randn((h,), gen, dev, dt, scale=2.5)
        return Sample({"x": x, "residual": residual})

    def _rows(self, problem: Problem, gen: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        h, dev, dt = problem.dims["H"], problem.device, problem.dtype
        x = randn((n, h), gen, dev, dt, scale=1.0)
        residual = randn((n, h), gen, dev, dt, scale=2.5)
        return x, residual

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        x, residual = self._rows(problem, gen, n)
        return [Sample({"x": xr, "residual": rr}) for xr, rr in zip(x, residual, strict=True)]

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        x = torch.stack([s.tensors["x"] for s in samples]).contiguous()
        residual = torch.stack([s.tensors["residual"] for s in samples]).contiguous()
        return (x, residual, problem.shared["weight"], problem.shared["eps"])

    def compose_around(
        self, problem: Problem, gen: torch.Generator, size: int, placed: dict[int, Sample], **hints: Any
    ) -> tuple[Any, ...]:
        mates = self._rows(problem, gen, size - len(placed))
        x, residual = (
            place_rows(m, {slot: s.tensors[name] for slot, s in placed.items()})
            for m, name in zip(mates, ("x", "residual"), strict=True)
        )
        return (x, residual, problem.shared["weight"], problem.shared["eps"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)] * 2

    def reference(self, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x, residual, weight, eps = args
        y, residual_out = torch.empty_like(x), torch.empty_like(x)
        for rows in reference_row_chunks(x):
            # The sum is rounded to the io dtype first: y normalises what residual_out holds.
            residual_out[rows] = (x[rows].float() + residual[rows].float()).to(x.dtype)
            y[rows] = rms_norm_fp32(residual_out[rows], weight, eps).to(x.dtype)
        return y, residual_out

    def workloads(self) -> list[Workload]:
        return list(_WORKLOADS)

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        b, h = workload.params["B"], workload.params["H"]
        x = randn((b, h), gen, device, dtype, scale=1.0)
        residual = randn((b, h), gen, device, dtype, scale=2.5)
        w = randn((h,), gen, device, dtype, scale=0.1, shift=1.0)
        return (x, residual, w, 1e-6)

    def flops(self, workload: Workload) -> float:
        b, h = workload.params["B"], workload.params["H"]
        # The residual add on top of RMSNorm's square, sum, scale and weight.
        return 5.0 * b * h

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        b, h = workload.params["B"], workload.params["H"]
        # Read x and residual, write y and residual_out, read the weight once.
        return float((4 * b * h + h) * element_size(dtype))


TASK = AddRMSNorm()
