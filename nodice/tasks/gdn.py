"""Gated delta net (linear attention): one sequence is one sample.

``kernel(q[B,T,Hh,Dk], k[B,T,Hh,Dk], v[B,T,Hh,Dv], g[B,T,Hh] fp32, beta[B,T,Hh] fp32,
scale) -> o[B,T,Hh,Dv]``. Per head, a state ``S[Dk,Dv]`` starts at zero and
each token does ``S ← exp(g)·S``; ``u ← beta·(v − kᵀS)``; ``S ← S + k⊗u``;
``o = scale·qᵀS``.

Inputs follow Qwen3-Next's gated DeltaNet layer: q and k are L2-normalised
per head, ``g = −exp(A_log)·softplus(a + dt_bias)`` is a negative log-decay
(per-head ``A_log`` and ``dt_bias`` are the layer's weights, shared by the
batch), ``beta = sigmoid(b)`` lies in (0, 1).

``T`` is shared by the whole batch (the tensors are dense), so a sequence
length is a property of the *problem*: BI contexts that need another length
ask for a problem variant (``params["variant"] = {"T": …}``), lengths on both
sides of the chunk sizes that chunked kernels use.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from nodice.tasks._scratch import scratch_budget
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

# Qwen3-Next-80B-A3B's linear-attention layers: 16 query/key heads, 32 value heads, head dim 128.
# The signature has one head count: Hh=32 is the value-head layout (q/k repeated per value head),
# Hh=16 the query/key-head one.
_QWEN3_NEXT = "Qwen3-Next-80B-A3B"
_WORKLOADS = [
    ("prefill-8k", {"B": 1, "T": 8192, "Hh": 32}),
    ("prefill-4x4k", {"B": 4, "T": 4096, "Hh": 32}),
    ("batch-16x1k", {"B": 16, "T": 1024, "Hh": 32}),
    ("batch-64x256", {"B": 64, "T": 256, "Hh": 32}),
    ("qk-heads-prefill-8k", {"B": 1, "T": 8192, "Hh": 16}),
]
_HEAD_DIM = 128

# Validation problems. CPU: two heads of 16 (the interpreter pays per operation and per
# step of the recurrence); GPU: the real head layout at moderate lengths.
_CPU_DIMS = {"Hh": 2, "Dk": 16, "Dv": 16}
_GPU_DIMS = {"Hh": 32, "Dk": _HEAD_DIM, "Dv": _HEAD_DIM}
# Lengths drawn for correctness problems: on and off multiples of 8, 16 and 64.
_CPU_LENGTHS = [12, 16, 20, 33]
_GPU_LENGTHS = [64, 200, 300, 1000]
# BI contexts as (variant length, [(batch, target position)]). The first group's lengths
# sit between chunk multiples; later groups sit on and just past them.
_CPU_CONTEXTS = [
    (20, [(2, -1), (3, 1), (5, 0), (8, 4), (12, -1)]),
    (16, [(3, 2), (6, 0)]),
    (33, [(2, 1), (4, -1)]),
]
_GPU_CONTEXTS = [
    (300, [(2, -1), (3, 1), (4, 0), (5, 2), (8, 7), (17, 8), (33, 0)]),
    (64, [(2, 1), (3, 0), (8, -1), (64, 32)]),
    (65, [(2, 0), (5, 4)]),
    (1000, [(2, 1), (6, -1)]),
]
# The problem-shape sweep: (length, heads, [(batch, target position)]) with one head, so that
# B·heads (2 … 257) and the batch's tokens (B·T) cross the SM count and powers of two between
# these batches; the real layout (32 heads) is past most such thresholds at batch 1.
_GPU_SWEEP = [(64, 1, [(2, 1), (9, 8), (33, 16), (133, 66), (257, -1)])]
_CPU_SWEEP = [(16, 1, [(3, 2), (9, 4), (17, -1), (65, 32), (133, -1)])]

# fp32 state in every case; bf16 inputs and output, and recurrences hundreds of steps long,
# leave a correct kernel ~1 % from the fp32 reference.
_GDN_TOLERANCES = {
    torch.float32: Tolerance(atol=2e-4, rtol=2e-4),
    torch.float16: Tolerance(atol=4e-3, rtol=4e-3),
    torch.bfloat16: Tolerance(atol=2e-2, rtol=2e-2),
}


def recurrence_blocks(
    batch: int,
    length: int,
    heads: int,
    dk: int,
    dv: int,
    budget: int | None = None,
    decay_channels: int = 1,
) -> tuple[int, int]:
    """(sequences, tokens) per block of :func:`gated_delta_rule`: the sequences' fp32 states
    (with a rank-1 update and a transient of the same size) and the block's fp32 q, k, v, o,
    o's cast copy, decay (``decay_channels`` per head: 1, or Dk for a per-channel gate) and
    beta fit the scratch budget, one token of one sequence at least."""
    budget = scratch_budget(budget)
    state = 3 * heads * dk * dv * 4
    token = heads * (2 * dk + 3 * dv + 1 + decay_channels) * 4
    sequences = max(1, min(batch, budget // (state + token)))
    tokens = max(1, min(length, (budget - sequences * state) // (sequences * token)))
    return sequences, tokens


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    out_dtype: torch.dtype = torch.float32,
    budget: int | None = None,
) -> torch.Tensor:
    """The recurrence token by token in fp32: o[B,T,Hh,Dv] in ``out_dtype``, each value rounded once.

    ``g`` is one log-decay per head (``[B,T,Hh]``, gated DeltaNet) or one per key
    channel (``[B,T,Hh,Dk]``, Kimi delta attention: ``S ← diag(exp(g))·S``).
    Sequences are independent and the state carries all a token passes on, so
    the work runs in blocks of sequences and tokens (:func:`recurrence_blocks`)
    whose fp32 copies fit the scratch budget; the arithmetic of each token is
    the same whatever the blocks.
    """
    b, t, h, dk = q.shape
    dv = v.shape[-1]
    channels = dk if g.dim() == 4 else 1
    sequences, tokens = recurrence_blocks(b, t, h, dk, dv, budget, decay_channels=channels)
    out = torch.empty((b, t, h, dv), dtype=out_dtype, device=q.device)
    for s0 in range(0, b, sequences):
        seqs = slice(s0, min(b, s0 + sequences))
        state = torch.zeros((seqs.stop - s0, h, dk, dv), dtype=torch.float32, device=q.device)
        for t0 in range(0, t, tokens):
            steps = slice(t0, min(t, t0 + tokens))
            block = [x[seqs, steps] for x in (q, k, v, g, beta)]
            out[seqs, steps] = _advance(state, block, scale).to(out_dtype)
    return out


def _advance(state: torch.Tensor, block: list[torch.Tensor], scale: float) -> torch.Tensor:
    """Run a block of tokens (its q, k, v, g, beta) through the recurrence, updating
    ``state[b,h,Dk,Dv]`` in place: o[b,t,h,Dv] fp32."""
    q, k, v, g, beta = block
    # Head-major fp32 copies: a token's slice is then a batch over (sequence, head) that
    # matmul takes as it is.
    qf, kf, vf = (
        x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format) for x in (q, k, v)
    )
    # [b,h,t,1,1] for a per-head gate, [b,h,t,Dk,1] for a per-channel one: each scales state rows.
    decay = torch.exp(g.float()).transpose(1, 2)
    decay = decay[..., None, None] if g.dim() == 3 else decay[..., None]
    gate = beta.float().transpose(1, 2)[..., None]
    out = torch.empty_like(vf)
    for i in range(qf.shape[2]):
        state.mul_(decay[:, :, i])
        k_i = kf[:, :, i, None, :]
        u = gate[:, :, i] * (vf[:, :, i] - torch.matmul(k_i, state).squeeze(-2))
        state.add_(k_i.transpose(-1, -2) * u[:, :, None, :])
        out[:, :, i] = torch.matmul(qf[:, :, i, None, :], state).squeeze(-2)
    return out.mul_(scale).transpose(1, 2)


def gate_weights(heads: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head ``A_log`` and ``dt_bias`` initialised as in Mamba-2 / Qwen3-Next:
    A in [1, 16], softplus(dt_bias) = dt log-uniform in [1e-3, 1e-1]."""
    a_log = torch.log(1.0 + 15.0 * torch.rand(heads, generator=gen))
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * torch.rand(heads, generator=gen))
    dt_bias = dt + torch.log(-torch.expm1(-dt))
    return a_log, dt_bias


class GatedDeltaNet(Task):
    name = "gdn"
    family = "linear attention"
    signature = (
        "kernel(q[B,T,Hh,Dk], k[B,T,Hh,Dk], v[B,T,Hh,Dv], g[B,T,Hh] fp32, beta[B,T,Hh] fp32, "
        "scale: float) -> o[B,T,Hh,Dv] bf16; S[Dk,Dv]=0, per token S ← exp(g)·S; "
        "u ← beta·(v − kᵀS); S ← S + k⊗u; o = scale·qᵀS"
    )
    sample_unit = "one sequence"
    output_names = ("o",)
    arity = 6
    # BI context tables; a task with the same recurrence and other chunk hazards replaces them.
    cpu_contexts = _CPU_CONTEXTS
    gpu_contexts = _GPU_CONTEXTS
    cpu_sweep = _CPU_SWEEP
    gpu_sweep = _GPU_SWEEP

    def gate_weights(self, heads: int, dk: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's gate weights (``A_log``, ``dt_bias``), shared by the batch."""
        return gate_weights(heads, gen)

    def gate(self, problem: Problem, gen: torch.Generator) -> torch.Tensor:
        """One sample's log-decays ``g[T, Hh]`` (fp32, CPU)."""
        t, h = problem.dims["T"], problem.dims["Hh"]
        gate_in = torch.randn((t, h), generator=gen)
        g: torch.Tensor = -torch.exp(problem.shared["a_log"]) * F.softplus(
            gate_in + problem.shared["dt_bias"]
        )
        return g

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
        a_log, dt_bias = self.gate_weights(dims["Hh"], dims["Dk"], gen)
        shared = {"scale": dims["Dk"] ** -0.5, "a_log": a_log, "dt_bias": dt_bias}
        return Problem(device, dtype, dims, shared)

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        d, dev, dtype = problem.dims, problem.device, problem.dtype
        t, h, dk, dv = d["T"], d["Hh"], d["Dk"], d["Dv"]
        cpu = torch.device("cpu")
        q = F.normalize(randn((t, h, dk), gen, cpu, torch.float32), dim=-1)
        k = F.normalize(randn((t, h, dk), gen, cpu, torch.float32), dim=-1)
        v = randn((t, h, dv), gen, dev, dtype)
        g = self.gate(problem, gen)
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
        return _GDN_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 3, 8] if device.type == "cpu" else [1, 5, 16]

    def contexts(self, device: torch.device) -> list[BIContext]:
        table = self.cpu_contexts if device.type == "cpu" else self.gpu_contexts
        sweep = self.cpu_sweep if device.type == "cpu" else self.gpu_sweep
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
            Workload(f"qwen3-next-{tag}", {**p, "Dk": _HEAD_DIM, "Dv": _HEAD_DIM}, _QWEN3_NEXT)
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
        a_log, dt_bias = self.gate_weights(p["Hh"], p["Dk"], gen)
        shared = {"scale": p["Dk"] ** -0.5, "a_log": a_log, "dt_bias": dt_bias}
        problem = Problem(device, dtype, dims, shared)
        return self.compose(problem, [self.sample(problem, gen) for _ in range(p["B"])], gen)

    def flops(self, workload: Workload) -> float:
        """Per token and head: decay Dk·Dv, kᵀS 2·Dk·Dv, rank-1 update 2·Dk·Dv, qᵀS 2·Dk·Dv."""
        p = workload.params
        return 7.0 * p["B"] * p["T"] * p["Hh"] * p["Dk"] * p["Dv"]

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """q, k, v read and o written once, plus the fp32 gates."""
        p = workload.params
        tokens = p["B"] * p["T"] * p["Hh"]
        return float(tokens * (2 * p["Dk"] + 2 * p["Dv"]) * element_size(dtype) + tokens * 2 * 4)


TASK = GatedDeltaNet()
