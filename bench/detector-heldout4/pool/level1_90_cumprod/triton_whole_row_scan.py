import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _cumprod_row_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=1.0)
    y = tl.associative_scan(x, 0, _mul)
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    """One program per row, whole row in registers/shared memory, single scan."""

    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        xt = x.movedim(self.dim, -1).contiguous()
        n = xt.shape[-1]
        x2 = xt.view(-1, n)
        y = torch.empty_like(x2)
        BLOCK = triton.next_power_of_2(n)
        _cumprod_row_kernel[(x2.shape[0],)](x2, y, n, BLOCK=BLOCK)
        return y.view(xt.shape).movedim(-1, self.dim)
