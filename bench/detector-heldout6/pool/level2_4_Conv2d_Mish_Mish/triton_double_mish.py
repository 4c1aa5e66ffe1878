import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mish(x):
    sp = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
    e = tl.exp(-2.0 * sp)
    return x * (1.0 - e) / (1.0 + e)


@triton.jit
def _double_mish_kernel(y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(y_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, _mish(_mish(v)), mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        _double_mish_kernel[(triton.cdiv(n, 2048),)](y, out, n, BLOCK=2048)
        return out
