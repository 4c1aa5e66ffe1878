import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scan_row_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros((1,), tl.float32)
    for start in range(0, N, BLOCK):
        idx = start + offs
        v = tl.load(x_ptr + row * N + idx, mask=idx < N, other=0.0)
        c = tl.cumsum(v, axis=0) + carry
        tl.store(y_ptr + row * N + idx, c, mask=idx < N)
        carry = tl.sum(tl.where(offs == BLOCK - 1, c, 0.0), axis=0, keep_dims=True)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        R, N = x.shape
        y = torch.empty_like(x)
        _scan_row_kernel[(R,)](x, y, N, BLOCK=4096)
        return y
