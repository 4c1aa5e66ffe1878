import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sqdiff_partial_kernel(p_ptr, t_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    p = tl.load(p_ptr + offs, mask=m, other=0.0)
    t = tl.load(t_ptr + offs, mask=m, other=0.0)
    d = p - t
    tl.store(out_ptr + pid, tl.sum(d * d, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        p = predictions.contiguous().view(-1)
        t = targets.contiguous().view(-1)
        n = p.numel()
        BLOCK = 65536
        nblk = triton.cdiv(n, BLOCK)
        partial = torch.empty(nblk, device=p.device, dtype=torch.float32)
        _sqdiff_partial_kernel[(nblk,)](p, t, partial, n, BLOCK=BLOCK)
        return partial.sum() / n
