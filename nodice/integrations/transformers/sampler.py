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

Nothing in the call reads the host: a step may be a CUDA graph, captured once and replayed for
other requests. The ledger hands the sampler each batch as it is scheduled; the sampler then
writes that batch's draw seeds into a device buffer the call reads (row i: the i-th request that
draws), and reads the previous step's fingerprints out of another (at the next batch, or when the
record is read).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import LogitsProcessor

from nodice.integrations.transformers.batches import (
    LEDGER,
    BatchEntry,
    device_fingerprint,
    draw_seed,
    request_seed,
)
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
    settle: Callable[[], None] | None = None  # collects the fingerprints still on the device

    def add(self, request_id: str, draw: int, fingerprint: int) -> None:
        self.fingerprints[request_id][draw] = fingerprint

    def of(self, request_id: str) -> list[int]:
        if self.settle is not None:
            self.settle()
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
        self._seeds: torch.Tensor | None = None  # [rows] int64: the staged batch's draw seeds
        self._prints: torch.Tensor | None = None  # [rows] int64: the last call's fingerprints
        self._staged: tuple[BatchEntry, ...] | None = None  # draws of the batch scheduled last
        self._pending: tuple[BatchEntry, ...] = ()  # draws whose fingerprints are on the device
        if record is not None:
            record.settle = self.collect
        LEDGER.listen(self.stage)

    def stage(self, batch: tuple[BatchEntry, ...]) -> None:
        """A batch was scheduled (before its forward): collect the last step's fingerprints, write
        this one's seeds."""
        self.collect()
        draws = tuple(e for e in batch if e.has_new_token)
        self._staged = self._pending = draws
        self._write_seeds(draws)

    def _write_seeds(self, draws: tuple[BatchEntry, ...]) -> None:
        if self.params.do_sample and draws and self._seeds is not None:
            seeds = [draw_seed(request_seed(e.request_id, self.seed), e.draw) for e in draws]
            self._seeds[: len(seeds)].copy_(torch.tensor(seeds, dtype=torch.int64))

    def collect(self) -> None:
        """Move the fingerprints of the last step's draws from the device into the record."""
        pending, self._pending = self._pending, ()
        if not pending or self._prints is None or self.record is None or not self.record.active:
            return
        for entry, fp in zip(pending, self._prints[: len(pending)].tolist(), strict=True):
            self.record.add(entry.request_id, entry.draw, int(fp))

    def _buffers(self, rows: int, device: torch.device, staged: tuple[BatchEntry, ...] | None) -> None:
        """Device buffers of at least ``rows`` rows (allocated outside a capture, then kept: a graph
        replays with their addresses)."""
        if self._seeds is not None and self._seeds.numel() >= rows and self._seeds.device == device:
            return
        if _capturing(device):
            raise RuntimeError(f"nodice's sampler met {rows} rows first inside a CUDA graph capture")
        size = max(rows, 1024)
        self._seeds = torch.zeros(size, dtype=torch.int64, device=device)
        self._prints = torch.zeros(size, dtype=torch.int64, device=device)
        if staged:
            self._write_seeds(staged)  # staged before the buffers existed

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        rows, dev = scores.shape[0], scores.device
        capturing = _capturing(dev)
        staged, self._staged = self._staged, None  # each staged batch is one forward's
        if not capturing:
            # Rows past the drawing requests are padding (transformers keeps one row per request).
            if staged is not None and len(staged) > rows:
                staged, self._pending = None, ()  # not the batch these logits belong to
            if staged is not None and not staged:
                return scores  # a step of prefill chunks only: nothing is drawn from these rows
        self._buffers(rows, dev, staged)
        assert self._seeds is not None and self._prints is not None
        if self.record is not None and self.record.active:
            self._prints[:rows].copy_(device_fingerprint(scores))
        if not self.params.do_sample or self.kernels is None:
            return scores
        if staged is None and not capturing:
            # No batch to attach seeds to: transformers' own draw (batch-dependent), said so.
            why = "the batch was not recorded (a scheduler other than nodice's)"
            self.kernels.count("sampling").fell_back(why)
            return scores
        # Every row is drawn (rows past the draws with stale seeds: never read), so that a captured
        # step does the same for any batch it is replayed for.
        tokens = self._draw(scores, self._seeds[:rows])
        kept = torch.full_like(scores, float("-inf"))
        kept.scatter_(1, tokens.view(-1, 1), 0.0)
        return kept  # type: ignore[return-value]

    def _draw(self, scores: torch.Tensor, seed: torch.Tensor) -> torch.Tensor:
        assert self.kernels is not None
        stats = self.kernels.count("sampling")
        n, dev, p = scores.shape[0], scores.device, self.params
        logits = scores.float().contiguous()
        temperature = torch.full((n,), p.temperature, dtype=torch.float32, device=dev)
        top_k = torch.full((n,), p.top_k, dtype=torch.int32, device=dev)
        top_p = torch.full((n,), p.top_p, dtype=torch.float32, device=dev)
        reason = self.kernels.refuse("sampling", logits)
        if reason is None:
            stats.routed += 1
            fn = self.kernels.fn("sampling")
            assert fn is not None
            tokens: torch.Tensor = fn(logits, temperature, top_k, top_p, seed)
            return tokens
        if _capturing(dev):
            raise RuntimeError(f"nodice's sampler cannot draw inside a CUDA graph: {reason}")
        stats.fell_back(reason)
        return _torch_draw(logits, p, [int(s) for s in seed.tolist()])


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


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
