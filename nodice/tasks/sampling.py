"""Token sampling: one request (its logits row, temperature, top-k, top-p and seed) is one sample.

``kernel(logits[B,V] fp32, temperature[B] fp32, top_k[B] int32, top_p[B] fp32,
seed[B] int64) -> tokens[B] int64``: softmax(logits/temperature), keep the
top_k largest (0 = all), then the smallest prefix (by descending probability)
whose mass reaches top_p, renormalise and draw using the request's own seed
only. Temperature 0 is greedy (argmax).

A draw cannot be compared with a reference draw, so the correctness rule is
the task's own (:meth:`Sampling.check_correctness`): greedy requests must
return exactly the argmax, every token must lie in its request's allowed set,
and the empirical distribution over many seeds must be within a
total-variation bound of the exact filtered distribution. Batch invariance
is still bitwise: the same request with the same seed must get the same
token in any batch, whatever its batchmates' temperatures, top-k and top-p.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from nodice.tasks._scratch import row_chunks
from nodice.tasks.base import (
    BIContext,
    CorrectnessReport,
    KernelRun,
    Output,
    Problem,
    Sample,
    Task,
    Workload,
)

# Vocabularies of real models; the CPU one stays small because the interpreter pays per operation.
_VOCABS = [("Llama-3", "llama3", 128256), ("Qwen3", "qwen3", 151936)]
_BATCHES = [1, 8, 64, 256]
_CPU_VOCAB = 256
# The gate's GPU problem: large enough for the kernels' multi-tile paths, small enough that the
# distributional check (thousands of requests in one batch) stays fast. Workloads use real vocabularies.
_GPU_VOCAB = 32768

# Batchmate styles for the BI contexts.
_MATES = ("mix", "greedy", "wide", "narrow")

# (batch, batchmates, target position).
_CPU_CONTEXTS = [
    (2, "greedy", -1),
    (3, "wide", 0),
    (8, "mix", 4),
    (17, "narrow", 16),
    (64, "wide", 31),
    (129, "mix", 128),
]
_GPU_CONTEXTS = [
    (2, "greedy", -1),
    (3, "wide", 0),
    (8, "mix", 4),
    (17, "narrow", 16),
    (64, "mix", 0),
    (133, "wide", 66),
    (257, "mix", -1),
]

# Requests whose sampled distribution is measured: (temperature, top_k, top_p).
# Small supports give the total-variation test its power at a few hundred draws.
_DISTRIBUTION_CONFIGS = [(1.0, 0, 0.8), (0.6, 8, 1.0), (1.5, 20, 0.7)]
# Each is drawn this many times (distinct seeds) in one batch.
_CPU_DRAWS = 256
_GPU_DRAWS = 2048
# Requests in the batch checked for exact greedy tokens and allowed sets.
_CPU_RULE_BATCH = 48
_GPU_RULE_BATCH = 256
# Probability that the TV bound rejects a correct sampler (per configuration).
_FALSE_REJECT = 1e-6
# Slack on the top-p boundary for the allowed-set check: fp32 masses round.
_TOP_P_SLACK = 1e-4
# A distribution check's row has no token within this much mass of its top-p boundary, or after
# _STRICT_ROWS draws (a large vocabulary's dense tail), none heavier than _BOUNDARY_MASS there.
_BOUNDARY_GAP = 1e-3
_STRICT_ROWS = 16
_BOUNDARY_MASS = 1e-3
# 8-byte values the reference holds at once per logit: the scaled and sorted logits, the
# order, the sort's own buffers, exponentials, probabilities and their cumulative sums.
_FP64_PER_LOGIT = 8


@dataclass(frozen=True)
class FilteredDistribution:
    """The exact distribution of one request, and the tokens a correct kernel may return."""

    probs: torch.Tensor  # [V] float64, zero outside the kept set
    allowed: torch.Tensor  # [V] bool: kept set with a little top-p slack for fp32 rounding
    mass_above: torch.Tensor  # [V] float64: top-k mass strictly above each token
    top_k_probs: torch.Tensor  # [V] float64: the distribution after top-k, before top-p


def filtered_distribution(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float, slack: float = _TOP_P_SLACK
) -> FilteredDistribution:
    """Temperature softmax, top-k (ties at the k-th value kept), then top-p, in float64."""
    z = logits.double().cpu() / temperature
    vocab = z.numel()
    k = vocab if top_k <= 0 or top_k > vocab else top_k
    in_top_k = z >= torch.topk(z, k).values[-1]
    e = torch.where(in_top_k, torch.exp(z - z.max()), torch.zeros_like(z))
    q = e / e.sum()
    # Mass strictly above each token (tied tokens share it): a token is kept while that is below top_p.
    order = torch.argsort(z, descending=True, stable=True)
    zs, qs = z[order], q[order]
    exclusive = torch.cumsum(qs, 0) - qs
    _, group = torch.unique_consecutive(zs, return_inverse=True)
    first = torch.full((int(group.max()) + 1,), math.inf, dtype=torch.float64)
    first = first.scatter_reduce(0, group, exclusive, reduce="amin")
    mass_above = torch.empty_like(q)
    mass_above[order] = first[group]
    keep = in_top_k & (mass_above < top_p)
    probs = torch.where(keep, q, torch.zeros_like(q))
    allowed = in_top_k & (mass_above < top_p + slack)
    return FilteredDistribution(probs / probs.sum(), allowed, mass_above, q)


def sample_rows(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    seed: torch.Tensor,
) -> torch.Tensor:
    """The reference draw for a batch of requests, in float64: tokens[B] int64."""
    vocab = logits.shape[1]
    greedy = temperature <= 0
    z = logits.double() / torch.where(greedy, 1.0, temperature.double())[:, None]
    z_sorted, order = torch.sort(z, dim=1, descending=True, stable=True)
    del z
    k = torch.where((top_k <= 0) | (top_k > vocab), vocab, top_k).long()
    in_top_k = z_sorted >= z_sorted.gather(1, (k - 1)[:, None])
    e = torch.exp(z_sorted - z_sorted[:, :1]) * in_top_k
    del z_sorted
    q = e / e.sum(dim=1, keepdim=True)
    del e
    keep = in_top_k & (torch.cumsum(q, dim=1) - q < top_p.double()[:, None])
    cdf = torch.cumsum(q * keep, dim=1)
    u = torch.tensor(
        [float(torch.rand((), generator=torch.Generator().manual_seed(int(s)))) for s in seed.tolist()],
        dtype=torch.float64,
        device=logits.device,
    )
    pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=vocab - 1)
    drawn = order.gather(1, pick).squeeze(1)
    return torch.where(greedy, logits.argmax(dim=1), drawn)


def filter_words(temperature: float, top_k: int, top_p: float) -> str:
    """How a message names a request's parameters: the catalog task's words."""
    return f"temperature={temperature:.3g}, top_k={top_k}, top_p={top_p:.3g}"


def request_words(i: int, temperature: float, top_k: int, top_p: float, token: int) -> tuple[str, str]:
    """How a message names request ``i`` and its token: the catalog task's words."""
    return f"request {i} ({filter_words(temperature, top_k, top_p)})", f"token {token}"


# (request index, temperature, top_k, top_p, token) -> (the request, its token), as a message names them.
RequestWords = Callable[[int, float, int, float, int], tuple[str, str]]


def rule_violation(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    tokens: torch.Tensor,
    words: RequestWords = request_words,
) -> str:
    """What is wrong with a batch's tokens, or "": greedy requests must get exactly the argmax,
    the others a token inside their top-k/top-p set."""
    logits, tokens = logits.cpu(), tokens.cpu()
    vocab = logits.shape[1]
    for i in range(logits.shape[0]):
        tok, t = int(tokens[i]), float(temperature[i])
        k, p = int(top_k[i]), float(top_p[i])
        label, token = words(i, t, k, p, tok)
        if not 0 <= tok < vocab:
            return f"{label}: {token} is not in [0, {vocab})"
        if t <= 0.0:
            if logits[i, tok] != logits[i].max():
                return f"{label}: greedy {token} is not the argmax {int(logits[i].argmax())}"
        elif not bool(filtered_distribution(logits[i], t, k, p).allowed[tok]):
            return f"{label}: {token} is outside the top-k/top-p set"
    return ""


def tv_bound(probs: torch.Tensor, draws: int, false_reject: float = _FALSE_REJECT) -> float:
    """Total-variation distance a correct sampler's empirical distribution stays below w.p. 1-δ.

    The smaller of two valid bounds: McDiarmid around the mean
    (E[TV] ≤ ½·Σ√(p(1-p)/n), one draw moves TV by ≤ 1/n) and
    Bretagnolle-Huber-Carol (P(Σ|p̂-p| ≥ λ) ≤ 2^m·e^(-nλ²/2), m the support).
    """
    p = probs[probs > 0]
    log_inv = math.log(1.0 / false_reject)
    mcdiarmid = 0.5 * float(torch.sqrt(p * (1 - p) / draws).sum()) + math.sqrt(log_inv / (2 * draws))
    bhc = 0.5 * math.sqrt(2.0 * (p.numel() * math.log(2.0) + log_inv) / draws)
    return min(mcdiarmid, bhc)


def _choose(gen: torch.Generator, options: list[Any]) -> Any:
    return options[int(torch.randint(len(options), (1,), generator=gen))]


def _uniform(gen: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=gen))


class Sampling(Task):
    name = "sampling"
    family = "sampling"
    unit = "GB/s"
    signature = (
        "kernel(logits[B,V] fp32, temperature[B] fp32, top_k[B] int32, top_p[B] fp32, seed[B] int64) "
        "-> tokens[B] int64; softmax(logits/temperature), top_k (0 = all), then top_p, renormalise, "
        "draw with the request's own seed; temperature 0 = argmax"
    )
    sample_unit = "one request"
    output_names = ("tokens",)
    arity = 5

    # The logits are fp32 in every context: there is no storage dtype to probe.
    cpu_half_probe = False

    def dtype_for(self, device: torch.device) -> torch.dtype:
        return torch.float32

    def problem(
        self, gen: torch.Generator, device: torch.device, dtype: torch.dtype, **variant: Any
    ) -> Problem:
        """``V=`` fixes the vocabulary (a FlashInfer-Bench definition's); else the device's size."""
        vocab = variant.get("V") or (_CPU_VOCAB if device.type == "cpu" else _GPU_VOCAB)
        return Problem(device, torch.float32, {"V": int(vocab)})

    def parameters(self, temperature: float, top_k: int, top_p: float) -> tuple[float, int, float]:
        """The filter a request of these parameters gets: all of them here. A sampler that takes fewer
        (a FlashInfer-Bench definition without ``top_p``) sets the others to what filters nothing."""
        return temperature, top_k, top_p

    def filter_words(self, temperature: float, top_k: int, top_p: float) -> str:
        """How a message names a request's parameters."""
        return filter_words(temperature, top_k, top_p)

    def request_words(
        self, i: int, temperature: float, top_k: int, top_p: float, token: int
    ) -> tuple[str, str]:
        """How a message names request ``i`` and its token."""
        return request_words(i, temperature, top_k, top_p, token)

    # ---- requests -------------------------------------------------------------
    def logits_row(self, problem: Problem, gen: torch.Generator) -> torch.Tensor:
        """A language model's next-token logits: a Gaussian bulk and a head of plausible tokens."""
        vocab = problem.dims["V"]
        row = torch.randn(vocab, generator=gen) * _uniform(gen, 1.5, 3.0)
        head = torch.randperm(vocab, generator=gen)[: int(torch.randint(3, 40, (1,), generator=gen))]
        row[head] += torch.rand(head.numel(), generator=gen) * 4.0 + 2.0
        return row

    def sample(self, problem: Problem, gen: torch.Generator, **hints: Any) -> Sample:
        """One request; ``mates`` picks the parameter style (mix, greedy, wide, narrow)."""
        style = hints.get("mates", "mix")
        if style not in _MATES:
            raise ValueError(f"unknown batchmate style {style!r} (one of {', '.join(_MATES)})")
        row = self.logits_row(problem, gen)
        if style == "greedy":
            params = (0.0, 0, 1.0)
        elif style == "wide":
            params = (_uniform(gen, 1.2, 2.0), 0, 1.0)
        elif style == "narrow":
            params = (_uniform(gen, 0.2, 0.6), _choose(gen, [1, 2, 5]), _choose(gen, [0.3, 0.5]))
        else:
            temperature = 0.0 if float(torch.rand((), generator=gen)) < 0.1 else _uniform(gen, 0.3, 1.5)
            params = (temperature, _choose(gen, [0, 0, 5, 20, 50]), _choose(gen, [1.0, 0.95, 0.9, 0.8]))
        return self.request(problem, row, *params, seed=int(torch.randint(2**62, (1,), generator=gen)))

    def samples(self, problem: Problem, gen: torch.Generator, n: int, **hints: Any) -> list[Sample]:
        """``n`` requests; of a mixed draw of several, the last is greedy. So every validation
        tracks a greedy request alone and among sampling batchmates: an all-greedy shortcut
        (``argmax`` when every request of the batch is greedy) runs on both sides."""
        out = [self.sample(problem, gen, **hints) for _ in range(n)]
        if n > 1 and hints.get("mates", "mix") == "mix":
            out[-1] = self.sample(problem, gen, mates="greedy")
        return out

    def request(
        self, problem: Problem, row: torch.Tensor, temperature: float, top_k: int, top_p: float, seed: int
    ) -> Sample:
        dev = problem.device
        temperature, top_k, top_p = self.parameters(temperature, top_k, top_p)
        return Sample(
            {
                "logits": row.to(device=dev, dtype=torch.float32),
                "temperature": torch.tensor(temperature, dtype=torch.float32, device=dev),
                "top_k": torch.tensor(top_k, dtype=torch.int32, device=dev),
                "top_p": torch.tensor(top_p, dtype=torch.float32, device=dev),
                "seed": torch.tensor(seed, dtype=torch.int64, device=dev),
            }
        )

    def compose(self, problem: Problem, samples: list[Sample], gen: torch.Generator) -> tuple[Any, ...]:
        names = ("logits", "temperature", "top_k", "top_p", "seed")
        return tuple(torch.stack([s.tensors[n] for s in samples]).contiguous() for n in names)

    def select(
        self, output: Output, index: int, args: tuple[Any, ...] | None = None
    ) -> tuple[torch.Tensor, ...]:
        # A one-element slice, so a mismatch reports the token values themselves.
        outs = output if isinstance(output, tuple) else (output,)
        return tuple(o[index : index + 1] for o in outs)

    # ---- reference and correctness ------------------------------------------------
    def output_spec(self, args: tuple[Any, ...]) -> list[tuple[torch.Size, torch.dtype]]:
        return [(torch.Size((args[0].shape[0],)), torch.int64)]

    def reference(self, *args: Any) -> torch.Tensor:
        """A correct sampler, batched: sort, top-k, top-p, an inverse-CDF draw with a uniform
        from torch's generator seeded by the request's seed. Its tokens are not the kernel's."""
        logits = args[0]
        tokens = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
        # Requests are independent; a chunk's float64 rows stay within the scratch budget.
        for rows in row_chunks(logits.shape[0], _FP64_PER_LOGIT * 8 * logits.shape[1]):
            tokens[rows] = sample_rows(*(a[rows] for a in args))
        return tokens

    def check_correctness(
        self, run: KernelRun, device: torch.device, dtype: torch.dtype, seed: int
    ) -> CorrectnessReport | None:
        gen = torch.Generator().manual_seed(seed * 7919 + 1)
        problem = self.problem(gen, device, dtype)
        failure = self._check_rules(run, problem, gen)
        if failure:
            return CorrectnessReport(False, failure, 1, 0.0)
        worst = 0.0
        draws = _CPU_DRAWS if device.type == "cpu" else _GPU_DRAWS
        for trial, config in enumerate(_DISTRIBUTION_CONFIGS, start=2):
            temperature, top_k, top_p = self.parameters(*config)
            row, dist = self._clear_row(problem, gen, temperature, top_k, top_p)
            row = row.to(problem.device)  # once, not once per request
            seeds = torch.randint(2**62, (draws,), generator=gen).tolist()
            samples = [self.request(problem, row, temperature, top_k, top_p, s) for s in seeds]
            tokens = self._tokens(run(self.compose(problem, samples, gen)))
            label = self.filter_words(temperature, top_k, top_p)
            outside = ~dist.allowed[tokens.clamp(0, row.numel() - 1)] | (tokens < 0) | (tokens >= row.numel())
            if bool(outside.any()):
                bad = int(tokens[outside][0])
                token = self.request_words(0, temperature, top_k, top_p, bad)[1]
                return CorrectnessReport(False, f"{label}: {token} is outside the allowed set", trial, 0.0)
            empirical = torch.bincount(tokens, minlength=row.numel()).double() / draws
            tv = 0.5 * float((empirical - dist.probs).abs().sum())
            bound = tv_bound(dist.probs, draws)
            worst = max(worst, tv)
            if tv > bound:
                detail = (
                    f"{label}: total-variation distance {tv:.3f} between {draws} draws and the exact "
                    f"distribution exceeds {bound:.3f}"
                )
                return CorrectnessReport(False, detail, trial, tv)
        return CorrectnessReport(True, "", 1 + len(_DISTRIBUTION_CONFIGS), worst)

    def _tokens(self, out: Output) -> torch.Tensor:
        tokens = out[0] if isinstance(out, tuple) else out
        return tokens.detach().cpu().long()

    def _clear_row(
        self, problem: Problem, gen: torch.Generator, temperature: float, top_k: int, top_p: float
    ) -> tuple[torch.Tensor, FilteredDistribution]:
        """A logits row whose top-p boundary is not within rounding of a token's mass above.

        In a vocabulary of 100K tokens and more (a FlashInfer-Bench definition's) the boundary falls
        among many tokens of tiny mass, some always near it: after a few draws a row is taken where
        those tokens are small enough that rounding either side of the boundary moves the exact
        distribution by a fraction of the total-variation bound.
        """
        attempt = 0
        while True:
            row = self.logits_row(problem, gen)
            dist = filtered_distribution(row, temperature, top_k, top_p)
            near = (dist.mass_above - top_p).abs() <= _BOUNDARY_GAP
            if top_p >= 1.0 or not bool(near.any()):
                return row, dist
            attempt += 1
            if attempt >= _STRICT_ROWS and float(dist.top_k_probs[near].max()) <= _BOUNDARY_MASS:
                return row, dist

    def _check_rules(self, run: KernelRun, problem: Problem, gen: torch.Generator) -> str:
        """A mixed batch (greedy, narrow, wide and random requests) through :func:`rule_violation`."""
        size = _CPU_RULE_BATCH if problem.device.type == "cpu" else _GPU_RULE_BATCH
        styles = ["greedy", "narrow", "wide"] + ["mix"] * (size - 3)
        args = self.compose(problem, [self.sample(problem, gen, mates=s) for s in styles], gen)
        logits, temperature, top_k, top_p, _ = args
        return rule_violation(logits, temperature, top_k, top_p, self._tokens(run(args)), self.request_words)

    # ---- batch invariance ----------------------------------------------------------
    def contexts(self, device: torch.device) -> list[BIContext]:
        table = _CPU_CONTEXTS if device.type == "cpu" else _GPU_CONTEXTS
        return [BIContext(f"B={b},mates {mates}", b, pos, {"mates": mates}) for b, mates, pos in table]

    def witnesses(self, device: torch.device) -> int:
        # An RNG fault only shows when the draw has room to move: several requests make
        # one with a broad distribution near-certain. Each costs two batch-1 calls.
        return 4 if device.type == "cpu" else 15

    # ---- performance -------------------------------------------------------------
    def workloads(self) -> list[Workload]:
        return [
            Workload(f"{tag}-b{b}", {"B": b, "V": v}, model) for model, tag, v in _VOCABS for b in _BATCHES
        ]

    def small_workloads(self) -> list[Workload]:
        return [
            Workload("cpu-b8", {"B": 8, "V": _CPU_VOCAB}),
            Workload("cpu-b64", {"B": 64, "V": _CPU_VOCAB}),
        ]

    def workload_inputs(
        self, workload: Workload, gen: torch.Generator, device: torch.device, dtype: torch.dtype
    ) -> tuple[Any, ...]:
        b, v = workload.params["B"], workload.params["V"]
        problem = Problem(device, torch.float32, {"V": v})
        return self.compose(problem, [self.sample(problem, gen) for _ in range(b)], gen)

    def flops(self, workload: Workload) -> float:
        """Softmax of every logit (scale, subtract, exp, add): the useful arithmetic per element."""
        return 4.0 * workload.params["B"] * workload.params["V"]

    def bytes_moved(self, workload: Workload, dtype: torch.dtype) -> float:
        """The logits read once, the per-request parameters, the tokens written."""
        b, v = workload.params["B"], workload.params["V"]
        return float(b * v * 4 + b * (4 + 4 + 4 + 8) + b * 8)


TASK = Sampling()
