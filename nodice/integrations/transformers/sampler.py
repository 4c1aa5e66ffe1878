"""Seeded, batch-invariant sampling for continuous batching, as a logits processor.

transformers' continuous batching draws with ``torch.multinomial`` (one generator for the whole
batch: a request's token depends on its batchmates) and lets no sampler be supplied. What it does
take is a logits processor. :class:`NodiceSampler` runs first: it draws every row with nodice's
``sampling`` kernel (temperature, top-k, top-p, and a seed per request and per draw, see
:func:`~nodice.integrations.transformers.batches.draw_seed`) and returns scores that keep only the
drawn token, which ``multinomial`` or ``argmax`` then picks with certainty; the warpers transformers
adds after it (temperature, top-k, top-p) keep that token too. With ``do_sample=False`` it leaves
the scores alone (``argmax`` is exact per row).

It can also record, per request and draw, an exact fingerprint of the raw logits, for
``nodice bench e2e`` to compare bit for bit.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import LogitsProcessor

from nodice.integrations.transformers.batches import LEDGER, draw_seed, logits_fingerprint, request_seed
from nodice.integrations.transformers.kernels import KernelSet


@dataclass(frozen=True)
class SamplingParams:
    """What the sampler draws with: the generation config's, for every request."""

    do_sample: bool
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    @classmethod
    def from_config(cls, config: Any) -> SamplingParams:
        temperature = getattr(config, "temperature", None)
        return cls(
            bool(getattr(config, "do_sample", False)),
            1.0 if temperature is None else float(temperature),
            int(getattr(config, "top_k", None) or 0),
            float(getattr(config, "top_p", None) or 1.0),
        )


@dataclass
class LogitsRecord:
    """Per request, the fingerprint of the logits of each draw, in draw order."""

    fingerprints: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    active: bool = True  # off: nothing is recorded (no device-to-host copy per step)

    def add(self, request_id: str, draw: int, fingerprint: int) -> None:
        self.fingerprints[request_id][draw] = fingerprint

    def of(self, request_id: str) -> list[int]:
        draws = self.fingerprints.get(request_id, {})
        return [draws[i] for i in sorted(draws)]


class NodiceSampler(LogitsProcessor):
    """First logits processor of a continuous-batching run: nodice's sampling kernel, or a recorder."""

    supports_continuous_batching = True

    def __init__(
        self,
        params: SamplingParams,
        kernels: KernelSet | None,
        *,
        seed: int = 0,
        record: LogitsRecord | None = None,
    ) -> None:
        self.params = params
        self.kernels = kernels
        self.seed = seed
        self.record = record

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        taken = LEDGER.take_draws()
        # Rows past the drawing requests are padding (transformers keeps one row per request).
        known = taken is not None and len(taken) <= scores.shape[0]
        rows = taken or ()
        n = len(rows)
        if n == 0 and known:
            return scores  # a step of prefill chunks only: nothing is drawn from these rows
        if self.record is not None and self.record.active and known:
            for entry, fp in zip(rows, logits_fingerprint(scores[:n]), strict=True):
                self.record.add(entry.request_id, entry.draw, fp)
        if not self.params.do_sample or self.kernels is None:
            return scores
        stats = self.kernels.count("sampling")
        if not known:
            # No batch to attach seeds to: transformers' own draw (batch-dependent), said so.
            stats.fell_back("the batch was not recorded (a scheduler other than nodice's)")
            return scores
        seeds = [draw_seed(request_seed(e.request_id, self.seed), e.draw) for e in rows]
        tokens = self._draw(scores[:n], seeds)
        kept = scores.clone()
        kept[:n] = float("-inf")
        kept[:n].scatter_(1, tokens.view(-1, 1), 0.0)
        return kept  # type: ignore[return-value]

    def _draw(self, scores: torch.Tensor, seeds: list[int]) -> torch.Tensor:
        assert self.kernels is not None
        stats = self.kernels.count("sampling")
        n, dev, p = scores.shape[0], scores.device, self.params
        logits = scores.float().contiguous()
        temperature = torch.full((n,), p.temperature, dtype=torch.float32, device=dev)
        top_k = torch.full((n,), p.top_k, dtype=torch.int32, device=dev)
        top_p = torch.full((n,), p.top_p, dtype=torch.float32, device=dev)
        seed = torch.tensor(seeds, dtype=torch.int64, device=dev)
        reason = self.kernels.refuse("sampling", logits)
        if reason is None:
            stats.routed += 1
            fn = self.kernels.fn("sampling")
            assert fn is not None
            tokens: torch.Tensor = fn(logits, temperature, top_k, top_p, seed)
            return tokens
        stats.fell_back(reason)
        return _torch_draw(logits, p, seeds)


def _torch_draw(logits: torch.Tensor, p: SamplingParams, seeds: list[int]) -> torch.Tensor:
    """Row by row with a generator per row: invariant too, and slow; for what the kernel does not take."""
    out = []
    for row, seed in zip(logits, seeds, strict=True):
        if p.temperature == 0:
            out.append(int(row.argmax()))
            continue
        probs = torch.softmax(row.double() / p.temperature, dim=-1)
        order = torch.argsort(probs, descending=True, stable=True)
        sorted_probs = probs[order]
        if p.top_k > 0:
            sorted_probs[p.top_k :] = 0
        if p.top_p < 1.0:
            before = torch.cumsum(sorted_probs, 0) - sorted_probs
            sorted_probs[before >= p.top_p] = 0
        gen = torch.Generator().manual_seed(seed)
        pick = torch.multinomial(sorted_probs.cpu(), 1, generator=gen)
        out.append(int(order[pick.to(order.device)]))
    return torch.tensor(out, dtype=torch.int64, device=logits.device)
