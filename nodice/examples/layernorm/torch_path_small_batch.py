"""VIOLATES batch invariance: small batches take an eager PyTorch path, large ones a Triton kernel.

Below 8 rows the launch overhead of the Triton kernel is "not worth it", so
the batch is normalised with eager torch ops (latency first). The two paths
reduce the row in different orders — torch's mean and variance against the
kernel's one-pass sum and sum of squares — so a row's output bits depend on
which side of the threshold its batch falls.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    base = x_ptr + row * hidden
    s = tl.zeros([BLOCK_H], dtype=tl.float32)
    ss = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        s += x
        ss += x * x
    mean = tl.sum(s, axis=0) / hidden
    var = tl.sum(ss, axis=0) / hidden - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + row * hidden + start + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    batch, hidden = x.shape
    if batch < 8:
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        var = (xf - mean).pow(2).mean(-1, keepdim=True)
        return ((xf - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)
    x = x.contiguous()
    y = torch.empty_like(x)
    block_h = min(triton.next_power_of_2(hidden), 1024)
    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=block_h, num_warps=4)
    return y
