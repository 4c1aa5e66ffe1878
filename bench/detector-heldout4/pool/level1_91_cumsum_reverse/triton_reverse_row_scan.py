import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rev_cumsum_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    idx = tl.arange(0, BLOCK)
    # read the row back to front, scan, write back to front
    cols = n_cols - 1 - idx
    mask = idx < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    y = tl.cumsum(x, 0)
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        xt = x.movedim(self.dim, -1).contiguous()
        n = xt.shape[-1]
        x2 = xt.view(-1, n)
        y = torch.empty_like(x2)
        BLOCK = triton.next_power_of_2(n)
        _rev_cumsum_kernel[(x2.shape[0],)](x2, y, n, BLOCK=BLOCK)
        return y.view(xt.shape).movedim(-1, self.dim)
