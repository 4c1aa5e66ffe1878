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

import torch
import torch.nn.functional as F

from nodice.tasks.base import Problem, Workload, element_size
from nodice.tasks.gdn import GatedDeltaNet

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

# The validation problems are gdn's (CPU: two heads of 16, GPU: 32 heads of 128, the same
# lengths and tolerances). BI contexts as (variant length, [(batch, target position)]): the
# first group's length sits between chunk multiples, the later ones on and just past them.
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


def kda_gate_weights(heads: int, dk: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head ``A_log`` and per-channel ``dt_bias[Hh, Dk]`` initialised as Kimi-Linear's KDA
    layer does (Mamba-2 style): A in [1, 16], softplus(dt_bias) = dt log-uniform in [1e-3, 1e-1]."""
    a_log = torch.log(1.0 + 15.0 * torch.rand(heads, generator=gen))
    u = torch.rand((heads, dk), generator=gen)
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * u)
    dt_bias = dt + torch.log(-torch.expm1(-dt))
    return a_log, dt_bias


class KimiDeltaAttention(GatedDeltaNet):
    """gdn's recurrence, samples, batches and reference with a per-channel gate and Kimi-Linear shapes."""

    name = "kda"
    signature = (
        "kernel(q[B,T,Hh,Dk], k[B,T,Hh,Dk], v[B,T,Hh,Dv], g[B,T,Hh,Dk] fp32, beta[B,T,Hh] fp32, "
        "scale: float) -> o[B,T,Hh,Dv] bf16; S[Dk,Dv]=0, per token S ← diag(exp(g))·S; "
        "u ← beta·(v − kᵀS); S ← S + k⊗u; o = scale·qᵀS (fla chunk_kda's layout, q/k L2-normalised)"
    )
    cpu_contexts = _CPU_CONTEXTS
    gpu_contexts = _GPU_CONTEXTS
    cpu_sweep = _CPU_SWEEP
    gpu_sweep = _GPU_SWEEP

    def gate_weights(self, heads: int, dk: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return kda_gate_weights(heads, dk, gen)

    def gate(self, problem: Problem, gen: torch.Generator) -> torch.Tensor:
        """One sample's log-decays ``g[T, Hh, Dk]``: ``−exp(A_log)·softplus(f + dt_bias)`` per channel."""
        t, h, dk = problem.dims["T"], problem.dims["Hh"], problem.dims["Dk"]
        gate_in = torch.randn((t, h, dk), generator=gen)
        a = torch.exp(problem.shared["a_log"])[:, None]
        g: torch.Tensor = -a * F.softplus(gate_in + problem.shared["dt_bias"])
        return g

    def workloads(self) -> list[Workload]:
        return [
            Workload(
                f"kimi-linear-{tag}", {**p, "Hh": _HEADS, "Dk": _HEAD_DIM, "Dv": _HEAD_DIM}, _KIMI_LINEAR
            )
            for tag, p in _WORKLOADS
        ]

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """q, k, v read and o written once, plus the fp32 gates (Dk per token and head) and beta."""
        p = workload.params
        tokens = p["B"] * p["T"] * p["Hh"]
        return float(tokens * (2 * p["Dk"] + 2 * p["Dv"]) * element_size(dtype) + tokens * (p["Dk"] + 1) * 4)


TASK = KimiDeltaAttention()
