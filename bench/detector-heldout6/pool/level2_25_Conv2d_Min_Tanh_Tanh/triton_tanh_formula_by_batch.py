import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh_exp(v):
    e = tl.exp(-2.0 * tl.abs(v))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(v >= 0, t, -t)


@triton.jit
def _tanh_sigmoid(v):
    return 2.0 * tl.sigmoid(2.0 * v) - 1.0


@triton.jit
def _min_tanh2_kernel(y_ptr, out_ptr, HW, C, USE_SIGMOID: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < HW
    acc = tl.full((BLOCK,), float("inf"), tl.float32)
    for c in range(0, C):
        acc = tl.minimum(acc, tl.load(y_ptr + (b * C + c) * HW + offs, mask=m, other=float("inf")))
    if USE_SIGMOID:
        r = _tanh_sigmoid(_tanh_sigmoid(acc))
    else:
        r = _tanh_exp(_tanh_exp(acc))
    tl.store(out_ptr + b * HW + offs, r, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        out = torch.empty((B, 1, H, W), device=y.device, dtype=y.dtype)
        _min_tanh2_kernel[(B, triton.cdiv(H * W, 1024))](y, out, H * W, C, USE_SIGMOID=B >= 4, BLOCK=1024)
        return out
