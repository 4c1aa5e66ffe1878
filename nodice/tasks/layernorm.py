"""LayerNorm: ``y = (x − mean(x)) · rsqrt(var(x) + eps) · weight + bias``, one row is one sample.

The variance is the biased one (``mean((x − mean)²)``), as ``torch.nn.LayerNorm`` computes it.
The row statistics are two reductions over the hidden axis, so a kernel's BI risks are the
norms': how a row's sums are tiled, split or handed to another algorithm as the batch changes.
"""

from __future__ import annotations

from typing import Any

import torch

from nodice.tasks.base import Problem, Sample, Workload, element_size, randn
from nodice.tasks.rmsnorm import RowwiseTask, reference_row_chunks

# Hidden sizes of real models with LayerNorm (weight and bias): Falcon-7B, GPT-NeoX-20B, Phi-2,
# BLOOM-176B; decode batches and prefill chunks.
_WORKLOADS = [
    Workload("falcon-7b-decode", {"B": 128, "H": 4544}, "Falcon-7B"),
    Workload("falcon-7b-prefill", {"B": 8192, "H": 4544}, "Falcon-7B"),
    Workload("gpt-neox-20b-prefill", {"B": 8192, "H": 6144}, "GPT-NeoX-20B"),
    Workload("phi-2-prefill", {"B": 16384, "H": 2560}, "Phi-2"),
    Workload("bloom-176b-prefill", {"B": 4096, "H": 14336}, "BLOOM-176B"),
]


def layer_norm_fp32(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last axis in fp32 (biased variance)."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).pow(2).mean(dim=-1, keepdim=True)
    return (xf - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()


class LayerNorm(RowwiseTask):
    name = "layernorm"
    signature = "kernel(x[B,H] bf16, weight[H] bf16, bias[H] bf16, eps: float) -> y[B,H] bf16"
    output_names = ("y",)
    arity = 4

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """The layer's weight, bias and ε; ``variant`` may pin the hidden size ``H`` (the shape sweep)."""
        problem = super().problem(gen, device, dtype, **variant)
        problem.shared["bias"] = randn((problem.dims["H"],), gen, device, dtype, scale=0.1)
        return problem

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        # Activations with an offset: the mean is not zero, so subtracting it matters.
        x = randn((problem.dims["H"],), gen, problem.device, problem.dtype, scale=1.5, shift=0.3)
        return Sample({"x": x})

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        x = randn((n, problem.dims["H"]), gen, problem.device, problem.dtype, scale=1.5, shift=0.3)
        return [Sample({"x": row}) for row in x]

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        x = torch.stack([s.tensors["x"] for s in samples]).contiguous()
        return (x, problem.shared["weight"], problem.shared["bias"], problem.shared["eps"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        x, weight, bias, eps = args
        y = torch.empty_like(x)
        for rows in reference_row_chunks(x):
            y[rows] = layer_norm_fp32(x[rows], weight, bias, eps).to(x.dtype)
        return y

    def workloads(self) -> list[Workload]:
        return list(_WORKLOADS)

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        b, h = workload.params["B"], workload.params["H"]
        x = randn((b, h), gen, device, dtype, scale=1.5, shift=0.3)
        w = randn((h,), gen, device, dtype, scale=0.1, shift=1.0)
        bias = randn((h,), gen, device, dtype, scale=0.1)
        return (x, w, bias, 1e-5)

    def flops(self, workload: Workload) -> float:
        b, h = workload.params["B"], workload.params["H"]
        return 7.0 * b * h

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        b, h = workload.params["B"], workload.params["H"]
        return float((2 * b * h + 2 * h) * element_size(dtype))


TASK = LayerNorm()
