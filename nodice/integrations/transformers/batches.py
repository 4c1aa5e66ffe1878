"""What each continuous-batching step holds, as nodice's attention and sampler need to know it.

transformers' paged attention sees packed tokens and cumulative lengths, not who they belong to.
Two facts that the packing hides decide which kernel keeps a token batch-invariant:

* whether a request's single query token is a *generated* token (a decode step: the paged
  ``attention_decode`` kernel) or a *prompt* token that the scheduler happened to cut into a
  one-token chunk (a token budget running out, a prefix shared with another request): a prompt
  token must go through ``attention_varlen`` like the rest of its prompt, however it was chunked;
* which request and which draw a row of logits is, so that sampling uses that request's own seed.

The recording schedulers (registered in transformers' ``SCHEDULER_MAPPING`` as ``"nodice"`` and
``"nodice-prefill-first"``, and in place of ``"fifo"`` and ``"prefill_first"``) schedule exactly as
FIFO / prefill-first do and write each batch into the :data:`LEDGER`, with one change: a step of
one-token queries that includes a prompt's one-token chunk does not take transformers' decode fast
path (it runs as varlen, so the prompt token goes through ``attention_varlen``).

Each step's forward runs after its batch is scheduled and before the next one is. Where it runs
as a Python call (the varlen path), attention reads the batch from the ledger and checks it
against the packing; where the ledger does not match, every token goes through
``attention_varlen`` (invariant, slower for decode). A decode fast-path step reads nothing from
the ledger (it may be a CUDA graph replayed): every token in it is a generated one. Sampling
never reads the ledger inside the forward either: the ledger hands each batch, as it is recorded,
to the sampler, which writes the seeds of its draws into a device buffer the forward reads.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers.generation.continuous_batching.scheduler import (
    SCHEDULER_MAPPING,
    FIFOScheduler,
    PrefillFirstScheduler,
)

# transformers' own names too: a configuration that names "fifo" (the default) or "prefill_first"
# schedules exactly as before, and its batches are recorded.
SCHEDULERS = {
    "nodice": FIFOScheduler,
    "nodice-prefill-first": PrefillFirstScheduler,
    "fifo": FIFOScheduler,
    "prefill_first": PrefillFirstScheduler,
}


@dataclass(frozen=True)
class BatchEntry:
    """One request in a scheduled batch, in packing order."""

    request_id: str
    query_length: int
    decoding: bool  # its query is a generated token (a decode step), not prompt tokens
    has_new_token: bool  # the step ends with a draw for this request
    draw: int  # which token of the request that draw is (0: the first generated token)


class Ledger:
    """The batch scheduled last (process-wide: one continuous-batching loop at a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch: tuple[BatchEntry, ...] = ()
        self._listener: Callable[[tuple[BatchEntry, ...]], None] | None = None
        self.generation = 0  # bumped by every recorded batch: a step's identity beside its tensors
        self.steps = 0  # non-empty batches scheduled by a recording scheduler
        self.fast_steps = 0  # of them, steps sent down transformers' decode fast path

    def record(self, entries: Sequence[BatchEntry]) -> None:
        with self._lock:
            self._batch = tuple(entries)
            self.generation += 1
            listener, batch = self._listener, self._batch
        if listener is not None:
            listener(batch)

    def listen(self, listener: Callable[[tuple[BatchEntry, ...]], None] | None) -> None:
        """Call ``listener`` with every batch as it is recorded, before its forward runs (the sampler
        of the running loop: it stages the batch's seeds on the device and collects the last one's
        fingerprints)."""
        with self._lock:
            self._listener = listener

    def clear(self) -> None:
        self.record(())

    def batch_for(self, query_lengths: Sequence[int]) -> tuple[BatchEntry, ...] | None:
        """The recorded batch if it is the one packed with these query lengths, else ``None``."""
        with self._lock:
            batch = self._batch
        if len(batch) != len(query_lengths) or any(
            e.query_length != q for e, q in zip(batch, query_lengths, strict=True)
        ):
            return None
        return batch

    def size(self) -> int:
        """How many requests the recorded batch holds."""
        with self._lock:
            return len(self._batch)


LEDGER = Ledger()


def _entries(scheduled: Sequence[Any]) -> list[BatchEntry]:
    out = []
    for future in scheduled:
        state = future.state
        generated = state.generated_len()
        out.append(
            BatchEntry(state.request_id, future.query_length, generated > 0, future.has_new_token, generated)
        )
    return out


def _recording(base: Any) -> Any:
    class Recording(base):  # type: ignore[misc, valid-type]
        """``base``'s scheduling, unchanged; each batch is written to the ledger."""

        def schedule_batch(self, token_budget: int, cache_budget: int) -> Any:
            result = super().schedule_batch(token_budget, cache_budget)
            entries = _entries(result[0]) if result[0] else []
            if result[0] and result[1] and not all(e.decoding for e in entries):
                # transformers sends a step of one-token queries down its decode fast path, a
                # prompt's one-token chunk included; a prompt token must go through
                # attention_varlen like the rest of its prompt, so that step runs as varlen.
                result = _as_varlen(self, result)
            LEDGER.record(entries)
            if result[0]:
                LEDGER.steps += 1
                LEDGER.fast_steps += bool(result[1])
            return result

    Recording.__name__ = Recording.__qualname__ = f"Recording{base.__name__}"
    Recording._nodice_recording = True
    return Recording


def _as_varlen(scheduler: Any, result: Any) -> Any:
    """``result`` of ``schedule_batch`` with the decode fast path off. Its cache read was not
    budgeted (the fast path reads through the block table); it fits the read index unless blocks
    are shared."""
    requests, _, num_q_tokens, max_kv_read = result
    if max_kv_read > scheduler.cache.num_pages:
        raise RuntimeError(
            f"a step with a prompt's one-token chunk reads {max_kv_read} cached tokens, more than the "
            f"{scheduler.cache.num_pages} a varlen step can: turn block sharing off"
        )
    return requests, False, num_q_tokens, max_kv_read


def recording(scheduler_type: str | None) -> bool:
    """Whether ``scheduler_type`` (a ``ContinuousBatchingConfig``'s) names a recording scheduler."""
    return getattr(SCHEDULER_MAPPING.get(scheduler_type or "fifo"), "_nodice_recording", False) is True


def register_schedulers() -> None:
    for name, base in SCHEDULERS.items():
        if not recording(name):
            SCHEDULER_MAPPING[name] = _recording(base)


def request_seed(request_id: str, base_seed: int) -> int:
    """A request's sampling seed: its id and the run's seed, nothing about its batch."""
    return (zlib.crc32(request_id.encode()) ^ (base_seed * 0x9E3779B1)) & 0x7FFFFFFF


def draw_seed(seed: int, draw: int) -> int:
    """The seed of one draw (splitmix64 of the request's seed and the draw's index), in int63."""
    z = (seed * 0x9E3779B97F4A7C15 + draw + 1) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFF


def device_fingerprint(scores: torch.Tensor) -> torch.Tensor:
    """Per row, an exact integer hash of the fp32 logits' bits (equal rows ⇒ equal hashes), on the
    device (int64; integer sums, exact in any order)."""
    bits = scores.float().contiguous().view(torch.int32).to(torch.int64)
    return (bits * _weights(scores.shape[-1], scores.device)).sum(dim=-1)


_WEIGHTS: dict[tuple[int, str], torch.Tensor] = {}


def _weights(vocab: int, device: torch.device) -> torch.Tensor:
    key = (vocab, str(device))
    if key not in _WEIGHTS:
        gen = torch.Generator().manual_seed(20261206)
        w = torch.randint(1, 2**30, (vocab,), generator=gen, dtype=torch.int64) * 2 + 1
        _WEIGHTS[key] = w.to(device)
    return _WEIGHTS[key]
