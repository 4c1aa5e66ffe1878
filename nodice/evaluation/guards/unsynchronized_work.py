"""Rule ``unsynchronized-work``: the output must be complete when the call returns.

Work left on a side stream (or a thread) finishes outside the timed region. The
output is copied immediately after the call, on the caller's stream and without
synchronising the device, then compared with itself after a full synchronise
and a pause: any difference means some of the work was still in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from nodice.evaluation.guards.bits import differing, same_bits

RULE = "unsynchronized-work"
DESCRIPTION = "returns before its work is done (another stream or thread finishes it later)"

# Long enough for a straggling native thread to land its writes (Python threads are joined).
SETTLE_S = 0.05
# How long threads started by the call get to finish before the comparison.
JOIN_S = 2.0


def snapshot(out: Any) -> list[torch.Tensor]:
    """Copies of the output tensors made on the current stream, without waiting for other work."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().clone() for o in outs if isinstance(o, torch.Tensor)]


def settled_difference(
    out: Any, early: list[torch.Tensor], stream_before: Any, join: Callable[[float], None]
) -> str | None:
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
    on_cuda = any(o.is_cuda for o in outs)
    if on_cuda:
        if torch.cuda.current_stream() != stream_before:
            return "the call changed the current CUDA stream"
        torch.cuda.synchronize()
    time.sleep(SETTLE_S)
    join(JOIN_S)
    if on_cuda:
        torch.cuda.synchronize()
    for i, (late, first) in enumerate(zip(outs, early, strict=False)):
        if not same_bits(late, first):
            n = differing(late, first)
            return f"output {i} changed after the call returned ({n} elements written late)"
    return None
