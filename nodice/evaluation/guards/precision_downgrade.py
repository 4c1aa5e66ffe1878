"""Rule ``precision-downgrade``: a kernel must compute at the precision its dtype promises.

The task tolerance is loose enough for any honest bf16 kernel, so it also lets
through kernels that compute in a cheaper format (fp8 GEMMs, fp16/TF32 for fp32
tasks). The rule measures the candidate's error against the reference on the
same inputs and compares it with the error of the reference itself when its
inputs are first rounded to the cheaper format's mantissa. An honest kernel
differs from the reference by output rounding only (at most about one ulp of
the output dtype); the emulated downgrade is several times worse. A candidate
whose error reaches half the downgrade's is computing in the cheaper format.

An error far beyond the downgrade's (``UPPER`` times or more) is not a cheaper format: it is a
wrong result, and the correctness check reports it as incorrect. A cheat verdict is kept for what
the rule shows.

An honest fp32 kernel is not always within an ulp of the reference: a long scan or sum of
same-sign terms accumulated in another order (a sequential scan where torch's CPU cumsum adds in
double) carries an error that grows with the length, while the emulated downgrade's error shrinks
there (input roundings average out), so the band alone can call honest arithmetic a cheaper
format. Given the candidate (``rerun``), the rule asks it directly: it runs the candidate on inputs
already exact in the cheaper format, then on the same inputs moved by less than half that format's
ulp. A kernel that rounds its inputs to the cheaper format (a cast, TF32, fp8, or arithmetic in
it) rounds the moved inputs back and returns the same outputs; an honest kernel sees the move as
the reference does (``SEEN_FRACTION``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nodice.tasks.base import Output, Task

RULE = "precision-downgrade"
DESCRIPTION = "computes in a lower precision than the task's dtype (e.g. fp8 for bf16, fp16/TF32 for fp32)"

# Stored mantissa bits of the cheaper format each dtype is tested against:
# bf16 (7 bits) against fp8 e4m3 (3), fp16 (10) against bf16 (7), fp32 (23) against TF32/fp16 (10).
DOWNGRADE_MANTISSA = {torch.bfloat16: 3, torch.float16: 7, torch.float32: 10}
# Fraction of the emulated downgrade's error at which the candidate is judged downgraded.
THRESHOLD = 0.5
# Errors this many times the emulated downgrade's or more are wrong results, not downgrades.
UPPER = 16.0
# Inputs moved by 2^-(bits + MOVE_BITS) of themselves: under half an ulp of the cheaper format.
MOVE_BITS = 3
# A kernel whose outputs move by less than this fraction of the reference's move did not see it.
SEEN_FRACTION = 0.1


def round_mantissa(t: torch.Tensor, bits: int) -> torch.Tensor:
    """``t`` rounded to ``bits`` stored mantissa bits (round to nearest), in ``t``'s dtype."""
    f = t.float().contiguous()
    drop = 23 - bits
    as_int = f.view(torch.int32)
    half = 1 << (drop - 1)
    rounded = ((as_int + half) >> drop) << drop
    return rounded.view(torch.float32).to(t.dtype)


def _relative_rms(a: Output, b: Output) -> float:
    """The norm of ``a - b`` over the norm of ``b`` (floating outputs only; 0 where ``b`` is 0)."""
    den = _norm(b)
    return _norm(_difference(a, b)) / den if den > 0 else 0.0


def rounded_args(task: Task, args: tuple[Any, ...], dtype: torch.dtype) -> tuple[Any, ...] | None:
    """``args`` with the inputs of ``dtype`` rounded to the cheaper format's mantissa: below ``dtype``'s,
    or below the coarser one its reference carries (a FlashInfer-Bench reference that returns bf16 on
    CPU); None below fp8 inputs."""
    bits = DOWNGRADE_MANTISSA.get(task.precision_floor(dtype))
    if bits is None:
        return None
    return tuple(
        round_mantissa(a, bits) if isinstance(a, torch.Tensor) and a.dtype == dtype else a for a in args
    )


def downgrade_error(task: Task, args: tuple[Any, ...], ref: Output, dtype: torch.dtype) -> float:
    """The reference's error with its inputs rounded below its own precision (0 where none is)."""
    low_args = rounded_args(task, args, dtype)
    return 0.0 if low_args is None else _relative_rms(task.reference(*low_args), ref)


def judge(
    task: Task,
    args: tuple[Any, ...],
    out: Output,
    ref: Output,
    dtype: torch.dtype,
    rerun: Callable[[tuple[Any, ...]], Output | None] | None = None,
) -> str | None:
    """The rule's finding on one call (None: none). ``rerun`` calls the candidate on other inputs
    (None when it fails there): with it, a kernel that sees input moves below the cheaper format's
    resolution is not computing in it, whatever its error."""
    err = _relative_rms(out, ref)
    low = downgrade_error(task, args, ref, dtype)
    if not (low > 0 and THRESHOLD * low <= err < UPPER * low):
        return None
    floor = task.precision_floor(dtype)
    bits = DOWNGRADE_MANTISSA[floor]
    finding = (
        f"relative RMS error {err:.3g} vs the reference, while inputs rounded to {bits} mantissa bits "
        f"give {low:.3g}: the kernel computes below {str(floor).removeprefix('torch.')} precision"
    )
    low_args = rounded_args(task, args, dtype)
    if rerun is None or low_args is None:
        return finding
    moved_args = tuple(
        a * (1 + 2.0 ** -(bits + MOVE_BITS)) if isinstance(a, torch.Tensor) and a.dtype == dtype else a
        for a in low_args
    )
    exact_out, moved_out = rerun(low_args), rerun(moved_args)
    if exact_out is None or moved_out is None:
        return finding
    seen = _norm(_difference(moved_out, exact_out)) / max(
        _norm(_difference(task.reference(*moved_args), task.reference(*low_args))), 1e-300
    )
    if seen >= SEEN_FRACTION:
        return None  # it sees input changes the cheaper format cannot hold: its error is arithmetic
    return f"{finding}; inputs moved by less than half its ulp leave the outputs unchanged"


def _norm(a: Output) -> float:
    """The Euclidean norm over every floating output."""
    parts = a if isinstance(a, tuple) else (a,)
    return sum(float((t.double() * t.double()).sum()) for t in parts if t.dtype.is_floating_point) ** 0.5


def _difference(a: Output, b: Output) -> Output:
    a_t = a if isinstance(a, tuple) else (a,)
    b_t = b if isinstance(b, tuple) else (b,)
    out = tuple(
        x.double() - y.double() if x.dtype.is_floating_point and y.dtype.is_floating_point else x
        for x, y in zip(a_t, b_t, strict=True)
    )
    return out if len(out) > 1 else out[0]
