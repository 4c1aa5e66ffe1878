"""VIOLATES batch invariance: the rounding point of the residual depends on the batch size.

Mechanism: rounding point chosen from the batch. For decode-sized batches (B <= 16) a single
pass normalises the fp32 sum ``x + residual`` straight from registers; larger batches normalise
the sum after rounding it to the io dtype, as the stored ``residual_out`` holds it. Both paths
store the same ``residual_out`` and reduce in the same order, so in fp32 (where rounding to the
io dtype changes nothing) they agree bit for bit; in fp16 or bf16 a request's ``y`` differs
between a small and a large batch in a fraction of its elements.

Fix: normalise the same value whatever the batch: the rounded residual (what the next layer
reads) on every path.
"""

import torch
import triton
import triton.language as tl

SMALL_BATCH = 16


@triton.jit
def _add_rmsnorm_row(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, hidden, eps, BLOCK_H: tl.constexpr, ROUND_SUM: tl.constexpr
):
    row = tl.program_id(0)
    base = row * hidden
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        s = x + res
        tl.store(res_out_ptr + base + start + offs, s.to(res_out_ptr.dtype.element_ty), mask=mask)
        if ROUND_SUM:
            s = s.to(res_out_ptr.dtype.element_ty).to(tl.float32)
        acc += s * s
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        res = tl.load(res_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        s = x + res
        if ROUND_SUM:
            s = s.to(res_out_ptr.dtype.element_ty).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + start + offs, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, hidden = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    block_h = min(triton.next_power_of_2(hidden), 1024)
    # Decode batches skip the re-rounding: one fewer conversion per element.
    round_sum = batch > SMALL_BATCH
    _add_rmsnorm_row[(batch,)](
        x, residual, weight, y, residual_out, hidden, eps, BLOCK_H=block_h, ROUND_SUM=round_sum, num_warps=4
    )
    return y, residual_out
