"""RMSNorm: Triton for real batches, eager PyTorch for a handful of rows.

Launch overhead dominates for a few rows, so those go through plain torch ops.
"""
import torch
import triton
import triton.language as tl

_EAGER_MAX_ROWS = 4


@triton.jit
def _rms_fwd(x_ptr, w_ptr, y_ptr, stride, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    x = tl.load(x_ptr + row * stride + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / H
    y = x / tl.sqrt(var + eps) * w
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=m)


def _eager(x, weight, eps):
    xf = x.float()
    var = xf.pow(2).mean(dim=-1, keepdim=True)
    return (xf * torch.rsqrt(var + eps) * weight.float()).to(x.dtype)


def kernel(x, weight, eps):
    if x.shape[0] <= _EAGER_MAX_ROWS:
        return _eager(x, weight, eps)
    x = x.contiguous()
    y = torch.empty_like(x)
    _rms_fwd[(x.shape[0],)](x, weight, y, x.stride(0), x.shape[1], eps,
                            BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
