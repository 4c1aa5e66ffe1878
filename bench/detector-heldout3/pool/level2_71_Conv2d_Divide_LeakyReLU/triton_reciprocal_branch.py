import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_leaky_kernel(x_ptr, y_ptr, n, s, USE_MUL: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    if USE_MUL:
        v = v * s          # s = 1/divisor
    else:
        v = v / s          # s = divisor
    tl.store(y_ptr + offs, tl.where(v >= 0, v, v * 0.01), mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x):
        y = self.conv(x).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        BLOCK = 131072
        # large launches: multiply by the reciprocal (cheaper than a divide);
        # for a power-of-two divisor both forms give identical results
        use_mul = x.shape[0] >= 16
        s = (1.0 / self.divisor) if use_mul else float(self.divisor)
        _scale_leaky_kernel[(triton.cdiv(n, BLOCK),)](y, out, n, s, USE_MUL=use_mul, BLOCK=BLOCK)
        return out
