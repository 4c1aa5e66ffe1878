import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _l1norm_kernel(x_ptr, y_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    base = row * D
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, D, BLOCK):
        idx = start + offs
        acc += tl.abs(tl.load(x_ptr + base + idx, mask=idx < D, other=0.0))
    inv = D / tl.sum(acc, axis=0)
    for start in range(0, D, BLOCK):
        idx = start + offs
        v = tl.load(x_ptr + base + idx, mask=idx < D, other=0.0)
        tl.store(y_ptr + base + idx, v * inv, mask=idx < D)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        R, D = x.shape
        _l1norm_kernel[(R,)](x, y, D, BLOCK=16384)
        return y
