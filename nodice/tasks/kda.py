"""Kimi delta attention (linear attention): one sequence is one sample.

``kernel(q[B,T,Hh,Dk], k[B,T,Hh,Dk], v[B,T,Hh,Dv], g[B,T,Hh,Dk] fp32, beta[B,T,Hh] fp32,
scale) -> o[B,T,Hh,Dv]``. Per head, a state ``S[Dk,Dv]`` starts at zero and
each token does ``S ← diag(exp(g))·S`` (one decay per key channel: row ``i``
of the state is scaled by ``exp(g[i])``); ``u ← beta·(v − kᵀS)``;
``S ← S + k⊗u``; ``o = scale·qᵀS``. It is the gated delta rule of
:mod:`nodice.tasks.gdn` with a vector gate in place of the scalar one.

The arguments are fla's ``chunk_kda(q, k, v, g, beta, scale=scale)`` (and
``fused_recurrent_kda``) in their default layout: sequence-major ``[B, T, H, K]``,
``g`` the natural-log decay already through its activation, ``beta`` already
through its sigmoid, the output fla's ``o``; an adapter passes them as they are
and keeps ``o`` of the returned ``(o, final_state)``. Where this task differs:
no ``initial_state`` and no final state (a sample is a whole sequence from an
empty state); q and k arrive L2-normalised (fla's ``use_qk_l2norm_in_kernel=False``),
as the gdn task takes them; the gate arrives computed (``use_gate_in_kernel=False``);
one head count for q, k and v (Kimi-Linear has no grouped value heads); dense
``[B, T]`` batches rather than fla's ``cu_seqlens`` packing, as in gdn.

Inputs follow Kimi-Linear's KDA layers: ``g = −exp(A_log)·softplus(f + dt_bias)``
with a per-head ``A_log`` and a per-channel ``dt_bias`` (the layer's weights,
shared by the batch) and ``f`` the low-rank gate projection of the token,
``beta = sigmoid(b)`` in (0, 1).

``T`` is shared by the whole batch, so a sequence length is a property of the
*problem*: BI contexts that need another length ask for a problem variant
(``params["variant"] = {"T": …}``), lengths on and just past the chunk sizes
that chunked kernels use (8, 16, 32, 64), so that a kernel whose chunk
boundaries move with the batch changes the rounding of the target's tokens.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from nodice.tasks.base import (
    BIContext,
    Problem,
    Sample,
    Task,
    Tolerance,
    Workload,
    element_size,
    randn,
)
from nodice.tasks.gdn import gated_delta_rule

# Kimi-Linear-48B-A3B's KDA layers: 32 heads, head dim 128 for keys and values.
_KIMI_LINEAR = "Kimi-Linear-48B-A3B"
_WORKLOADS = [
    ("prefill-32k", {"B": 1, "T": 32768}),
    ("prefill-8k", {"B": 1, "T": 8192}),
    ("prefill-4x4k", {"B": 4, "T": 4096}),
    ("prefill-8x4k", {"B": 8, "T": 4096}),
    ("batch-16x1k", {"B": 16, "T": 1024}),
    ("batch-64x256", {"B": 64, "T": 256}),
    ("short-128x16", {"B": 128, "T": 16}),
]
_HEADS = 32
_HEAD_DIM = 128

# Validation problems. CPU: two heads of 16 (the interpreter pays per operation and per
# step of the recurrence); GPU: the real head layout at moderate lengths.
_CPU_DIMS = {"Hh": 2, "Dk": 16, "Dv": 16}
_GPU_DIMS = {"Hh": _HEADS, "Dk": _HEAD_DIM, "Dv": _HEAD_DIM}
# Lengths drawn for correctness problems: on and off multiples of 8, 16 and 64.
_CPU_LENGTHS = [12, 16, 20, 33]
_GPU_LENGTHS = [64, 200, 300, 1000]
# BI contexts as (variant length, [(batch, target position)]). The first group's length sits
# between chunk multiples; the later ones on and just past them (16, 33 = 2·16 + 1).
_CPU_CONTEXTS = [
    (20, [(2, -1), (3, 1), (5, 0), (8, 4), (12, -1)]),
    (16, [(3, 2), (6, 0)]),
    (33, [(2, 1), (4, -1)]),
]
_GPU_CONTEXTS = [
    (300, [(2, -1), (3, 1), (4, 0), (5, 2), (8, 7), (17, 8), (33, 0)]),
    (64, [(2, 1), (3, 0), (8, -1), (64, 32)]),
    (65, [(2, 0), (5, 4)]),
    (129, [(3, 1), (9, -1)]),
    (1000, [(2, 1), (6, -1)]),
]
# The problem-shape sweep: (length, heads, [(batch, target position)]) with one head, so that
# B·heads (2 … 257) and the batch's tokens (B·T) cross the SM count and powers of two between
# these batches; the real layout (32 heads) is past most such thresholds at batch 1. A sequence
# of several chunks (33 tokens on CPU, 300 on GPU) meets those thresholds too, so that a kernel
# that splits T into a number of segments chosen from B·heads moves a segment boundary.
_GPU_SWEEP = [
    (64, 1, [(2, 1), (9, 8), (33, 16), (133, 66), (257, -1)]),
    (300, 1, [(67, 33), (133, -1)]),
]
_CPU_SWEEP = [
    (16, 1, [(3, 2), (9, 4), (17, -1), (65, 32), (133, -1)]),
    (33, 1, [(45, 22), (133, -1)]),
]

# fp32 state in every case; bf16 inputs and output, and recurrences hundreds of steps long,
# leave a correct kernel ~1 % from the fp32 reference.
_KDA_TOLERANCES = {
    torch.float32: Tolerance(atol=2e-4, rtol=2e-4),
    torch.float16: Tolerance(atol=4e-3, rtol=4e-3),
    torch.bfloat16: Tolerance(atol=2e-2, rtol=2e-2),
}


def kda_gate_weights(heads: int, dk: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head ``A_log`` and per-channel ``dt_bias[Hh, Dk]`` initialised as Kimi-Linear's KDA
    layer does (Mamba-2 style): A in [1, 16], softplus(dt_bias) = dt log-uniform in [1e-3, 1e-1]."""
    a_log = torch.log(1.0 + 15.0 * torch.rand(heads, generator=gen))
    u = torch.rand((heads, dk), generator=gen)
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * u)
    dt_bias = dt + torch.log(-torch.expm1(-dt))
    return a_log, dt_bias


class KimiDeltaAttention(Task):
    name = "kda"
    family = "linear attention"
    signature = (
        "kernel(q[B,T,Hh,Dk], k[B,T,Hh,Dk], v[B,T,Hh,Dv], g[B,T,Hh,Dk] fp32, beta[B,T,Hh] fp32, "
        "scale: float) -> o[B,T,Hh,Dv] bf16; S[Dk,Dv]=0, per token S ← diag(exp(g))·S; "
        "u ← beta·(v − kᵀS); S ← S + k⊗u; o = scale·qᵀS (fla chunk_kda's layout, q/k L2-normalised)"
    )
    sample_unit = "one sequence"
    output_names = ("o",)
    arity = 6

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """Head layout, the layer's gate weights and the batch's length ``T`` (``variant`` may pin it)."""
        cpu = device.type == "cpu"
        dims: dict[str, Any] = dict(_CPU_DIMS if cpu else _GPU_DIMS)
        lengths = _CPU_LENGTHS if cpu else _GPU_LENGTHS
        dims["T"] = int(variant.get("T") or lengths[int(torch.randint(len(lengths), (1,), generator=gen))])
        if variant.get("Hh"):
            dims["Hh"] = int(variant["Hh"])
        a_log, dt_bias = kda_gate_weights(dims["Hh"], dims["Dk"], gen)
        shared = {"scale": dims["Dk"] ** -0.5, "a_log": a_log, "dt_bias": dt_bias}
        return Problem(device, dtype, dims, shared)

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        d, dev, dtype = problem.dims, problem.device, problem.dtype
        t, h, dk, dv = d["T"], d["Hh"], d["Dk"], d["Dv"]
        cpu = torch.device("cpu")
        q = F.normalize(randn((t, h, dk), gen, cpu, torch.float32), dim=-1)
        k = F.normalize(randn((t, h, dk), gen, cpu, torch.float32), dim=-1)
        v = randn((t, h, dv), gen, dev, dtype)
        gate_in = torch.randn((t, h, dk), generator=gen)
        a = torch.exp(problem.shared["a_log"])[:, None]
        g = -a * F.softplus(gate_in + problem.shared["dt_bias"])
        beta = torch.sigmoid(1.5 * torch.randn((t, h), generator=gen))
        tensors = {
            "q": q.to(device=dev, dtype=dtype),
            "k": k.to(device=dev, dtype=dtype),
            "v": v,
            "g": g.to(dev),
            "beta": beta.to(dev),
        }
        return Sample(tensors)

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        stacked = [
            torch.stack([s.tensors[n] for s in samples]).contiguous() for n in ("q", "k", "v", "g", "beta")
        ]
        return (*stacked, problem.shared["scale"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        v = args[2]
        return [(v.shape, v.dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        q, k, v, g, beta, scale = args
        return gated_delta_rule(q, k, v, g, beta, scale, out_dtype=v.dtype)

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return _KDA_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 3, 8] if device.type == "cpu" else [1, 5, 16]

    def contexts(self, device: torch.device) -> list[BIContext]:
        table = _CPU_CONTEXTS if device.type == "cpu" else _GPU_CONTEXTS
        sweep = _CPU_SWEEP if device.type == "cpu" else _GPU_SWEEP
        return [
            BIContext(f"T={t},B={b}", b, pos, {"variant": {"T": t}})
            for t, batches in table
            for b, pos in batches
        ] + [
            BIContext(f"T={t},H={h},B={b}", b, pos, {"variant": {"T": t, "Hh": h}})
            for t, h, batches in sweep
            for b, pos in batches
        ]

    def witnesses(self, device: torch.device) -> int:
        # Each witness costs two batch-1 calls per sequence length, each a full recurrence.
        return 2 if device.type == "cpu" else 15

    def workloads(self) -> list[Workload]:
        return [
            Workload(
                f"kimi-linear-{tag}", {**p, "Hh": _HEADS, "Dk": _HEAD_DIM, "Dv": _HEAD_DIM}, _KIMI_LINEAR
            )
            for tag, p in _WORKLOADS
        ]

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-b1-t64", {"B": 1, "T": 64, **_CPU_DIMS}),
            Workload("cpu-b8-t16", {"B": 8, "T": 16, **_CPU_DIMS}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        dims = {"T": p["T"], "Hh": p["Hh"], "Dk": p["Dk"], "Dv": p["Dv"]}
        a_log, dt_bias = kda_gate_weights(p["Hh"], p["Dk"], gen)
        shared = {"scale": p["Dk"] ** -0.5, "a_log": a_log, "dt_bias": dt_bias}
        problem = Problem(device, dtype, dims, shared)
        return self.compose(problem, [self.sample(problem, gen) for _ in range(p["B"])], gen)

    def flops(self, workload: Workload) -> float:
        """Per token and head: decay Dk·Dv, kᵀS 2·Dk·Dv, rank-1 update 2·Dk·Dv, qᵀS 2·Dk·Dv."""
        p = workload.params
        return 7.0 * p["B"] * p["T"] * p["Hh"] * p["Dk"] * p["Dv"]

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """q, k, v read and o written once, plus the fp32 gates (Dk per token and head) and beta."""
        p = workload.params
        tokens = p["B"] * p["T"] * p["Hh"]
        return float(tokens * (2 * p["Dk"] + 2 * p["Dv"]) * element_size(dtype) + tokens * (p["Dk"] + 1) * 4)


TASK = KimiDeltaAttention()
