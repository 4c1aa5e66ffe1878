import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sumsq_partial_kernel(x_ptr, part_ptr, D, chunk, SPLIT, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    sid = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    lo = sid * chunk
    for k in range(0, chunk, BLOCK):
        idx = lo + k + offs
        m = (idx < D) & (k + offs < chunk)
        v = tl.load(x_ptr + row * D + idx, mask=m, other=0.0)
        acc += v * v
    tl.store(part_ptr + row * SPLIT + sid, tl.sum(acc, axis=0))


@triton.jit
def _scale_kernel(x_ptr, y_ptr, norm_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    pid = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < D
    n = tl.load(norm_ptr + row)
    v = tl.load(x_ptr + row * D + offs, mask=m, other=0.0)
    tl.store(y_ptr + row * D + offs, v / n, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        R, D = x.shape
        # split each row across several programs when the batch alone cannot
        # fill the GPU (132 SMs on H100)
        SPLIT = max(1, min(16, 132 // R))
        chunk = triton.cdiv(D, SPLIT)
        part = torch.empty(R, SPLIT, device=x.device, dtype=torch.float32)
        _sumsq_partial_kernel[(R, SPLIT)](x, part, D, chunk, SPLIT, BLOCK=4096)
        norm = torch.sqrt(part.sum(dim=1))
        y = torch.empty_like(x)
        _scale_kernel[(R, triton.cdiv(D, 16384))](x, y, norm, D, BLOCK=16384)
        return y
