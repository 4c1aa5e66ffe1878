import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swish_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, RECIP: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    d = 1.0 + tl.exp(-x)
    if RECIP:
        y = x * (1.0 / d)
    else:
        y = x / d
    tl.store(y_ptr + offs, y, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 16384
        # reciprocal + multiply has higher throughput once the grid is large
        swish_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, RECIP=x.shape[0] >= 16)
        return y
