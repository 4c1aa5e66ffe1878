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
"""

from __future__ import annotations

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


def round_mantissa(t: torch.Tensor, bits: int) -> torch.Tensor:
    """``t`` rounded to ``bits`` stored mantissa bits (round to nearest), in ``t``'s dtype."""
    f = t.float().contiguous()
    drop = 23 - bits
    as_int = f.view(torch.int32)
    half = 1 << (drop - 1)
    rounded = ((as_int + half) >> drop) << drop
    return rounded.view(torch.float32).to(t.dtype)


def _relative_rms(a: Output, b: Output) -> float:
    a_t = a if isinstance(a, tuple) else (a,)
    b_t = b if isinstance(b, tuple) else (b,)
    num = den = 0.0
    for x, y in zip(a_t, b_t, strict=True):
        if not (x.dtype.is_floating_point and y.dtype.is_floating_point):
            continue
        d = x.double() - y.double()
        num += float((d * d).sum())
        den += float((y.double() * y.double()).sum())
    return (num / den) ** 0.5 if den > 0 else 0.0


def downgrade_error(task: Task, args: tuple[Any, ...], ref: Output, dtype: torch.dtype) -> float:
    """The reference's error with its inputs rounded below its own precision: below ``dtype``'s, or
    below the coarser one its reference carries (a FlashInfer-Bench reference that returns bf16 on CPU;
    none below fp8 inputs, 0 then)."""
    bits = DOWNGRADE_MANTISSA.get(task.precision_floor(dtype))
    if bits is None:
        return 0.0
    low_args = tuple(
        round_mantissa(a, bits) if isinstance(a, torch.Tensor) and a.dtype == dtype else a for a in args
    )
    return _relative_rms(task.reference(*low_args), ref)


def judge(task: Task, args: tuple[Any, ...], out: Output, ref: Output, dtype: torch.dtype) -> str | None:
    err = _relative_rms(out, ref)
    low = downgrade_error(task, args, ref, dtype)
    if low > 0 and THRESHOLD * low <= err < UPPER * low:
        floor = task.precision_floor(dtype)
        bits = DOWNGRADE_MANTISSA[floor]
        return (
            f"relative RMS error {err:.3g} vs the reference, while inputs rounded to {bits} mantissa bits "
            f"give {low:.3g}: the kernel computes below {str(floor).removeprefix('torch.')} precision"
        )
    return None
