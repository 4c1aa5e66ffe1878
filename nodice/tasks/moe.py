"""Mixture of experts: one token is one sample.

``kernel(x[T,H], router_logits[T,E] fp32, w_gate_up[E,2I,H], w_down[E,H,I], top_k) -> y[T,H]``.
Each token is routed on its own logits (softmax over E, top-k, renormalise)
and its output is the weighted sum of its experts' SwiGLU MLPs:
``expert_e(x) = (silu(Wg·x) * (Wu·x)) · Wdᵀ`` with ``Wg`` the first and ``Wu``
the second half of ``w_gate_up[e]`` (rows ``[0, I)`` and ``[I, 2I)``; the
vLLM ``w13`` layout).

What a token's batchmates change is *how many rows each expert holds*. That
is what breaks fused-MoE kernels: tile configs and split-K chosen from the
per-expert token count, small-batch dense paths, atomics in the combine. The
BI contexts therefore steer the batchmates' routing: toward the experts the
target uses (filling them past tile thresholds) or away from them (leaving
the target alone there), at token counts on both sides of the usual tiles.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nodice.tasks._scratch import row_chunks
from nodice.tasks.base import (
    DEFAULT_TOLERANCES,
    BIContext,
    Problem,
    Sample,
    Task,
    Tolerance,
    Workload,
    element_size,
    randn,
)

# (model, tag, experts, top-k, hidden, expert intermediate size).
_MODELS = [
    ("Qwen3-30B-A3B", "qwen3-30b-a3b", 128, 8, 2048, 768),
    ("Qwen3-235B-A22B", "qwen3-235b-a22b", 128, 8, 4096, 1536),
    ("Mixtral-8x7B", "mixtral-8x7b", 8, 2, 4096, 14336),
    ("DeepSeek-V2-Lite", "deepseek-v2-lite", 64, 6, 2048, 1408),
]
# Tokens per call: decode steps of a small and a large serving batch, and a prefill chunk.
_TOKENS = {"decode16": 16, "decode256": 256, "prefill4k": 4096}

# Validation problems: the interpreter pays per program and per operation, so
# the CPU experts are tiny (top-k of 3, so that the order of a token's expert
# contributions matters to its fp32 sum); the GPU problem has Qwen3's router
# (128 experts, top-8) with narrower experts so that weights are quick to draw.
_CPU_DIMS = {"E": 8, "top_k": 3, "H": 128, "I": 64}
_GPU_DIMS = {"E": 128, "top_k": 8, "H": 512, "I": 256}

# Router logits: realistic spread, plus a bias that steers a token toward (or
# away from) the problem's "home" experts. Unsteered samples lean toward the
# home experts, as real routers concentrate load; steered batchmates land on
# exactly the target's experts, or on none of them.
_LOGIT_SCALE = 1.5
_HOME_LEAN = 2.0
_STEER = 8.0
_ROUTES = ("lean", "toward", "away", "uniform")

# (tokens, batchmates' routing, target position). Token counts straddle 16-,
# 32- and 64-row tiles per expert once "toward" mates pile onto the target's experts.
_CPU_CONTEXTS = [
    (2, "toward", -1),
    (3, "away", 0),
    (8, "lean", 4),
    (16, "toward", 0),
    (17, "uniform", 8),
    (33, "away", -1),
    (40, "toward", 20),
    (64, "lean", 0),
]
_GPU_CONTEXTS = [
    (2, "toward", -1),
    (3, "away", 0),
    (8, "lean", 4),
    (16, "toward", 0),
    (17, "toward", -1),
    (31, "away", 15),
    (64, "uniform", 0),
    (65, "toward", 32),
    (128, "lean", -1),
    (257, "toward", 128),
    (1024, "away", 0),
    (1024, "uniform", 1023),
    (4096, "toward", 2048),
]

# A bf16 kernel rounds the SwiGLU activations to bf16 between the two GEMMs
# (as fused-MoE kernels do) and the output once more.
_MOE_TOLERANCES = {
    **DEFAULT_TOLERANCES,
    torch.float16: Tolerance(atol=4e-3, rtol=4e-3),
    torch.bfloat16: Tolerance(atol=2e-2, rtol=2e-2),
}


def _device_randn(
    shape: tuple[int, ...], gen: torch.Generator, device: torch.device, dtype: torch.dtype, scale: float
) -> torch.Tensor:
    """Large weights drawn on the device itself (seeded from ``gen``): CPU draws of GBs take minutes."""
    dev_gen = torch.Generator(device=device).manual_seed(int(torch.randint(2**62, (1,), generator=gen)))
    t = torch.randn(shape, generator=dev_gen, device=device, dtype=torch.float32).mul_(scale)
    return t.masked_fill_(t == 0, 1e-3).to(dtype)


def expected_active_experts(tokens: int, experts: int, top_k: int) -> float:
    """Experts reached by ``tokens`` tokens routed uniformly at random (each picks ``top_k`` distinct)."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over experts in fp32, top-k, renormalise: (weights[T,k] fp32, expert ids[T,k])."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids


# fp32 values per token of a reference chunk: per hidden element, its row of x, its output
# and, when an expert takes the token, the gathered row, the expert's output and its weighted
# copy; per intermediate element, that expert's gate/up pair, silu and the activation.
_FP32_PER_TOKEN_ROW = 5
_FP32_PER_INTER = 4


def moe_fp32(
    x: torch.Tensor, router_logits: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, top_k: int
) -> torch.Tensor:
    """y[T,H] in fp32: each expert, in increasing id, runs the tokens routed to it and adds
    its weighted output into theirs.

    A token occurs once per expert, so the additions of one ``index_add_`` never
    meet on a row (the float atomics of its CUDA kernel do not collide) and each
    token's sum over its experts runs in expert order: the result is deterministic.
    """
    weights, ids = route(router_logits, top_k)
    inter = w_down.shape[2]
    xf = x.float()
    y = torch.zeros_like(xf)
    for e in ids.unique().tolist():
        token, slot = torch.nonzero(ids == e, as_tuple=True)
        gate_up = xf[token] @ w_gate_up[e].float().t()
        act = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        out = act @ w_down[e].float().t()
        y.index_add_(0, token, weights[token, slot, None] * out)
    return y


class MoE(Task):
    name = "moe"
    family = "moe"
    signature = (
        "kernel(x[T,H] bf16, router_logits[T,E] fp32, w_gate_up[E,2I,H] bf16, w_down[E,H,I] bf16, "
        "top_k: int) -> y[T,H] bf16; softmax over E, top-k, renormalise; "
        "y = Σ weight·(silu(x·Wgᵀ)·(x·Wuᵀ))·Wdᵀ with [Wg; Wu] = w_gate_up[e]"
    )
    sample_unit = "one token"
    output_names = ("y",)
    arity = 5

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **sizes: Any
    ) -> Problem:
        """The device's sizes; ``E``, ``top_k``, ``H``, ``I`` fix them (a FlashInfer-Bench definition's)."""
        dims = dict(_CPU_DIMS if device.type == "cpu" else _GPU_DIMS)
        dims.update({k: int(v) for k, v in sizes.items() if k in dims})
        e, h, i = dims["E"], dims["H"], dims["I"]
        # Scaled like trained layers: unit-variance pre-activations for unit-variance tokens.
        w_gate_up = randn((e, 2 * i, h), gen, device, dtype, scale=1.0 / math.sqrt(h))
        w_down = randn((e, h, i), gen, device, dtype, scale=1.0 / math.sqrt(i))
        home = torch.randperm(e, generator=gen)[: dims["top_k"]].sort().values
        return Problem(device, dtype, dims, {"w_gate_up": w_gate_up, "w_down": w_down, "home_experts": home})

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """A token and its router logits; ``route`` steers them (lean, toward, away, uniform)."""
        d = problem.dims
        steer = hints.get("route", "lean")
        if steer not in _ROUTES:
            raise ValueError(f"unknown route {steer!r} (one of {', '.join(_ROUTES)})")
        x = randn((d["H"],), gen, problem.device, problem.dtype)
        logits = randn((d["E"],), gen, torch.device("cpu"), torch.float32, scale=_LOGIT_SCALE)
        bias = {"lean": _HOME_LEAN, "toward": _STEER, "away": -_STEER, "uniform": 0.0}[steer]
        logits[problem.shared["home_experts"]] += bias
        return Sample({"x": x, "router_logits": logits.to(problem.device)}, {"route": steer})

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        x = torch.stack([s.tensors["x"] for s in samples]).contiguous()
        logits = torch.stack([s.tensors["router_logits"] for s in samples]).contiguous()
        sh = problem.shared
        return (x, logits, sh["w_gate_up"], sh["w_down"], problem.dims["top_k"])

    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(args[0].shape, args[0].dtype)]

    def reference(self, *args: Any) -> torch.Tensor:
        x, router_logits, w_gate_up, w_down, top_k = args
        hidden, inter = x.shape[1], w_down.shape[2]
        y = torch.empty_like(x)
        # Tokens are routed and combined independently, so they can be taken a chunk at a time.
        for tokens in row_chunks(x.shape[0], _FP32_PER_TOKEN_ROW * hidden * 4 + _FP32_PER_INTER * inter * 4):
            y[tokens] = moe_fp32(x[tokens], router_logits[tokens], w_gate_up, w_down, top_k).to(x.dtype)
        return y

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return _MOE_TOLERANCES[dtype]

    def correctness_batches(self, device: torch.device) -> list[int]:
        return [1, 5, 16] if device.type == "cpu" else [1, 7, 64, 512]

    def contexts(self, device: torch.device) -> list[BIContext]:
        table = _CPU_CONTEXTS if device.type == "cpu" else _GPU_CONTEXTS
        return [BIContext(f"T={t},mates {steer}", t, pos, {"route": steer}) for t, steer, pos in table]

    def witnesses(self, device: torch.device) -> int:
        # Every witness costs two batch-1 calls; under the interpreter those dominate.
        return 5 if device.type == "cpu" else 15

    def workloads(self) -> list[Workload]:
        return [
            Workload(f"{tag}-{phase}", {"T": t, "E": e, "top_k": k, "H": h, "I": i}, model)
            for model, tag, e, k, h, i in _MODELS
            for phase, t in _TOKENS.items()
        ]

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-decode", {"T": 4, **_CPU_DIMS}),
            Workload("cpu-prefill", {"T": 64, **_CPU_DIMS}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        p = workload.params
        t, e, h, i = p["T"], p["E"], p["H"], p["I"]
        x = randn((t, h), gen, device, dtype)
        logits = randn((t, e), gen, device, torch.float32, scale=_LOGIT_SCALE)
        w_gate_up = _device_randn((e, 2 * i, h), gen, device, dtype, 1.0 / math.sqrt(h))
        w_down = _device_randn((e, h, i), gen, device, dtype, 1.0 / math.sqrt(i))
        return (x, logits, w_gate_up, w_down, p["top_k"])

    def flops(self, workload: Workload) -> float:
        """Per routed token and expert: gate/up GEMM 2·H·2I, down GEMM 2·I·H."""
        p = workload.params
        return 6.0 * p["T"] * p["top_k"] * p["H"] * p["I"]

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """Tokens and logits in, output out, and the weights of every expert the tokens reach.

        Workload logits are random, so the expected number of distinct experts
        reached is the honest lower bound (a decode step does not touch them all).
        """
        p = workload.params
        t, e, k, h, i = p["T"], p["E"], p["top_k"], p["H"], p["I"]
        es = element_size(dtype)
        weights = expected_active_experts(t, e, k) * 3 * h * i * es
        return float(2 * t * h * es + t * e * 4 + weights)


TASK = MoE()
