import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh(v):
    e = tl.exp(-2.0 * tl.abs(v))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(v >= 0, t, -t)


@triton.jit
def _min_tanh2_kernel(y_ptr, out_ptr, HW, C, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < HW
    acc = tl.full((BLOCK,), float("inf"), tl.float32)
    for c in range(0, C):
        acc = tl.minimum(acc, tl.load(y_ptr + (b * C + c) * HW + offs, mask=m, other=float("inf")))
    tl.store(out_ptr + b * HW + offs, _tanh(_tanh(acc)), mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        out = torch.empty((B, 1, H, W), device=y.device, dtype=y.dtype)
        BLOCK = 256 if B <= 2 else 1024
        _min_tanh2_kernel[(B, triton.cdiv(H * W, BLOCK))](y, out, H * W, C, BLOCK=BLOCK)
        return out
