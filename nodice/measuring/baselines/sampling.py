"""Sampling baselines: FlashInfer's fused top-k/top-p sampling, and torch with one generator per request.

Both apply the temperature as serving engines do before such a sampler
(logits divided by it, greedy rows taken by ``argmax`` on the raw logits)
and map ``top_k = 0`` ("all") to the vocabulary size.

FlashInfer's sampler is handed the batch's ``seed[B]`` tensor as its
``seed`` (its API takes a tensor of length 1 or B) with zero ``offset``s.
Its kernels seed Philox from ``seed[0]`` and use the row index as the
subsequence, so a request's draw depends on which request sits first and on
its own position: a batch-wide RNG, which the BI audit is expected to flag.

The torch baseline filters the whole batch at once (sort, top-k with ties
kept, top-p on the exclusive cumulative mass, as the task's reference does)
and draws each row with ``torch.multinomial`` from a ``torch.Generator``
seeded by that row's own seed: per-request RNG, at the price of one draw
call per request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nodice.measuring.baselines.spec import Baseline, require

FLASHINFER = "flashinfer-python"


def scaled_logits(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """``logits / temperature`` per row; greedy rows (temperature 0) are divided by 1."""
    greedy = temperature <= 0
    return logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]


def effective_top_k(top_k: torch.Tensor, vocab: int) -> torch.Tensor:
    """``top_k`` with 0 (and anything past the vocabulary) meaning the whole vocabulary."""
    return torch.where((top_k <= 0) | (top_k > vocab), torch.full_like(top_k, vocab), top_k)


def filtered_probs(
    logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted renormalised probabilities after top-k then top-p, and the sort order: ([B,V], [B,V])."""
    z = scaled_logits(logits.float(), temperature)
    z_sorted, order = torch.sort(z, dim=1, descending=True, stable=True)
    k = effective_top_k(top_k, z.shape[1]).long()
    in_top_k = z_sorted >= z_sorted.gather(1, (k - 1)[:, None])
    probs = torch.softmax(z_sorted.masked_fill(~in_top_k, float("-inf")), dim=1)
    keep = in_top_k & (torch.cumsum(probs, dim=1) - probs < top_p[:, None])
    kept = probs * keep
    return kept / kept.sum(dim=1, keepdim=True), order


def torch_sampling(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    seed: torch.Tensor,
) -> torch.Tensor:
    probs, order = filtered_probs(logits, temperature, top_k, top_p)
    picks = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    for row, row_seed in enumerate(seed.tolist()):
        gen = torch.Generator(device=logits.device).manual_seed(int(row_seed))
        picks[row] = torch.multinomial(probs[row], 1, generator=gen)[0]
    drawn = order.gather(1, picks[:, None]).squeeze(1)
    return torch.where(temperature <= 0, logits.argmax(dim=1), drawn)


def load_flashinfer_sampling() -> Callable[..., Any]:
    sample = require("flashinfer.sampling", FLASHINFER).top_k_top_p_sampling_from_logits

    def run(
        logits: torch.Tensor,
        temperature: torch.Tensor,
        top_k: torch.Tensor,
        top_p: torch.Tensor,
        seed: torch.Tensor,
    ) -> torch.Tensor:
        drawn = sample(
            scaled_logits(logits, temperature),
            effective_top_k(top_k, logits.shape[1]).to(torch.int32),
            top_p,
            deterministic=True,
            seed=seed,
            offset=torch.zeros_like(seed),
        )
        return torch.where(temperature <= 0, logits.argmax(dim=1), drawn.long())

    return run


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "sampling": (
        Baseline(
            "FlashInfer top-k/top-p sampling",
            load_flashinfer_sampling,
            FLASHINFER,
            note=(
                "flashinfer.sampling.top_k_top_p_sampling_from_logits(deterministic=True) on "
                "logits/temperature, seed=seed[B] tensor, offset=0 (its kernels seed from seed[0], "
                "row index as subsequence)"
            ),
        ),
        Baseline(
            "torch multinomial (per-request generator)",
            lambda: torch_sampling,
            "torch",
            ("cpu", "cuda"),
            "batched sort/top-k/top-p in torch, torch.multinomial per row with a Generator seeded by the "
            "row's seed; temperature 0 = argmax",
        ),
    ),
}
