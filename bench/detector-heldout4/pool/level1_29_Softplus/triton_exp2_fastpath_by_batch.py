import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softplus_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr, FAST: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if FAST:
        # exp2/log2 form maps onto the MUFU ex2/lg2 units
        LOG2E: tl.constexpr = 1.4426950408889634
        LN2: tl.constexpr = 0.6931471805599453
        y = tl.log2(1.0 + tl.exp2(x * LOG2E)) * LN2
    else:
        y = tl.log(1.0 + tl.exp(x))
    y = tl.where(x > 20.0, x, y)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 16384
        fast = x.shape[0] >= 8  # throughput path only pays off for big batches
        _softplus_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, FAST=fast)
        return y
