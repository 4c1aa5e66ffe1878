"""GEMM ``c = a @ b`` with fp32 accumulation; one row of ``a`` (a token through a linear layer) is a sample.

``b`` is the layer's weight, shared by every row of the batch. A row's output
must not depend on how many other tokens share the launch: that is exactly
what split-K, M-bucketed tile configs and small-M fast paths break.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nodice.tasks._scratch import row_chunks
from nodice.tasks.base import BIContext, Problem, Sample, Task, Workload, element_size, randn

# (model, short name, projection, K, N) of real linear layers, weights stored [K, N].
_LAYERS = [
    ("Llama-3-8B", "llama3-8b", "qkv", 4096, 6144),
    ("Llama-3-8B", "llama3-8b", "o", 4096, 4096),
    ("Llama-3-8B", "llama3-8b", "gate_up", 4096, 28672),
    ("Llama-3-8B", "llama3-8b", "down", 14336, 4096),
    ("Qwen3-8B", "qwen3-8b", "gate_up", 4096, 24576),
    ("Qwen3-32B", "qwen3-32b", "qkv", 5120, 10240),
    ("Qwen3-32B", "qwen3-32b", "down", 25600, 5120),
]
# Tokens per call, from one request's decode step to a long prefill chunk: M from 1 to 16384.
_TOKENS = {"decode-1": 1, "decode": 64, "mixed-512": 512, "prefill": 4096, "prefill-16k": 16384}

# The problem the gate checks on: CPU-sized for the interpreter, Llama-3-8B's O projection on GPU.
_CPU_DIMS = {"K": 512, "N": 256}
_GPU_DIMS = {"K": 4096, "N": 4096}
# And on GPU a long-K layer (Llama-3-8B's down projection), where split-K schedules act: K long
# against N leaves few output tiles at small M, which the square O projection never reaches (a
# fixed-size split-K that only long layers take is checked nowhere else). On CPU the problem is
# already twice as deep as it is wide.
_GPU_LONG_K = {"K": 14336, "N": 4096}
_LONG_K_SIZES = [2, 3, 16, 17, 64, 65, 128, 129, 256, 257, 512, 513]


def _workloads() -> list[Workload]:
    return [
        Workload(f"{tag}-{proj}-{phase}", {"M": m, "K": k, "N": n}, model)
        for model, tag, proj, k, n in _LAYERS
        for phase, m in _TOKENS.items()
    ]


def _batch_contexts(device: torch.device) -> list[BIContext]:
    """Row counts on both sides of the thresholds GEMMs switch on.

    Decode/GEMV paths (≤ 4–8 rows), 16-, 64- and 128-row tiles and the M buckets
    of tuned configs and split-K (16/17, 64/65, 128/129; ``torch.mm`` in bf16
    stops being invariant at 64 rows); on GPU also the end of one wave on 132
    SMs at N = 4096: 128 output tiles of 64×128 (256/257) or 128×128
    (512/513), and 132 row tiles of 64 or 128 rows (8448/8449, 16896/16897).
    """
    if device.type == "cpu":
        sizes = [2, 3, 16, 17, 64, 65, 129]
    else:
        sizes = [2, 3, 8, 16, 17, 31, 64, 65, 127, 128, 129, 256, 257, 512, 513, 1024, 4096]
        sizes += [8448, 8449, 16896, 16897]
    out: list[BIContext] = []
    for m in sizes:
        for pos, label in ((0, "first"), (m // 2, "middle"), (-1, "last")):
            out.append(BIContext(f"M={m},{label}", m, pos))
    if device.type != "cpu":
        for m in _LONG_K_SIZES:
            for pos, label in ((0, "first"), (-1, "last")):
                out.append(BIContext(f"long-k,M={m},{label}", m, pos, {"variant": dict(_GPU_LONG_K)}))
    return out


class Gemm(Task):
    name = "gemm"
    family = "gemm"
    signature = "kernel(a[M,K] bf16, b[K,N] bf16) -> c[M,N] bf16 (fp32 accumulation)"
    sample_unit = "one row of a (a token through a linear layer)"
    output_names = ("c",)
    arity = 2

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """The gate's weight matrix; ``variant`` may pin ``K`` and ``N`` (the long-K contexts)."""
        dims = dict(_CPU_DIMS if device.type == "cpu" else _GPU_DIMS)
        dims.update({k: int(v) for k, v in variant.items() if k in ("K", "N")})
        # Weights scaled like a trained layer's (unit-variance outputs for unit-variance inputs).
        b = randn((dims["K"], dims["N"]), gen, device, dtype, scale=1.0 / math.sqrt(dims["K"]))
        return Problem(device, dtype, dims, {"b": b})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        a = randn((problem.dims["K"],), gen, problem.device, problem.dtype, scale=1.0)
        return Sample({"a": a})

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        a = randn((n, problem.dims["K"]), gen, problem.device, problem.dtype, scale=1.0)
        return [Sample({"a": row}) for row in a]

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        a = torch.stack([s.tensors["a"] for s in samples]).contiguous()
        return (a, problem.shared["b"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        a, b = args
        return [(torch.Size((a.shape[0], b.shape[1])), a.dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        a, b = args
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        bf = b.float()
        # Rows of a are independent: a chunk's fp32 rows of a and c stay within the scratch budget.
        for rows in row_chunks(a.shape[0], 4 * (a.shape[1] + b.shape[1])):
            c[rows] = (a[rows].float() @ bf).to(a.dtype)
        return c

    def correctness_batches(self, device: torch.device) -> list[int]:
        # A partial last row tile (70 rows over 64-row tiles) next to decode sizes.
        return [1, 5, 70] if device.type == "cpu" else [1, 7, 64, 257, 1000]

    def contexts(self, device: torch.device) -> list[BIContext]:
        return _batch_contexts(device)

    def witnesses(self, device: torch.device) -> int:
        # In fp32 a reordered K reduction changes about half of a row's outputs, so a few rows
        # suffice on CPU, where each witness costs two slow batch-1 calls; bf16 on GPU hides
        # most changes, so keep the default there.
        return 5 if device.type == "cpu" else super().witnesses(device)

    def workloads(self) -> list[Workload]:
        return _workloads()

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-decode", {"M": 4, **_CPU_DIMS}),
            Workload("cpu-prefill", {"M": 64, **_CPU_DIMS}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        m, k, n = (workload.params[d] for d in ("M", "K", "N"))
        a = randn((m, k), gen, device, dtype, scale=1.0)
        b = randn((k, n), gen, device, dtype, scale=1.0 / math.sqrt(k))
        return (a, b)

    def flops(self, workload: Workload) -> float:
        m, k, n = (workload.params[d] for d in ("M", "K", "N"))
        return 2.0 * m * n * k

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        m, k, n = (workload.params[d] for d in ("M", "K", "N"))
        return float((m * k + k * n + m * n) * element_size(dtype))


TASK = Gemm()
