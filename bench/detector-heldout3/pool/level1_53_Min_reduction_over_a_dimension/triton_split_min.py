import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _min_partial_kernel(x_ptr, p_ptr, R, C, rows_per_split, SPLIT, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    pc = tl.program_id(1)
    ps = tl.program_id(2)
    cols = pc * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R)
    acc = tl.full((BLOCK_C,), float("inf"), tl.float32)
    r_lo = ps * rows_per_split
    for r0 in range(0, rows_per_split, BLOCK_R):
        r = r_lo + r0 + rows
        m = (r[:, None] < R) & ((r0 + rows)[:, None] < rows_per_split) & (cols[None, :] < C)
        tile = tl.load(x_ptr + b * R * C + r[:, None] * C + cols[None, :], mask=m, other=float("inf"))
        acc = tl.minimum(acc, tl.min(tile, axis=0))
    tl.store(p_ptr + (b * SPLIT + ps) * C + cols, acc, mask=cols < C)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, R, C = x.shape
        # more row-splits for small batches; min is exact so the split count is free
        SPLIT = 1
        while B * SPLIT < 32 and SPLIT < 8:
            SPLIT *= 2
        rows_per_split = triton.cdiv(R, SPLIT)
        part = torch.empty(B, SPLIT, C, device=x.device, dtype=torch.float32)
        _min_partial_kernel[(B, triton.cdiv(C, 128), SPLIT)](x, part, R, C, rows_per_split, SPLIT,
                                                             BLOCK_R=32, BLOCK_C=128)
        return part.amin(dim=1)
