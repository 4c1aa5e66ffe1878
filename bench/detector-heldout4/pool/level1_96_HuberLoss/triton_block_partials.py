import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _huber_partial_kernel(p_ptr, t_ptr, part_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0)
    d = p - t
    ad = tl.abs(d)
    l = tl.where(ad < 1.0, 0.5 * d * d, ad - 0.5)
    l = tl.where(mask, l, 0.0)
    tl.store(part_ptr + pid, tl.sum(l, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        p = predictions.contiguous().view(-1)
        t = targets.contiguous().view(-1)
        n = p.numel()
        BLOCK = 32768
        nb = triton.cdiv(n, BLOCK)
        partials = torch.empty(nb, device=p.device, dtype=torch.float32)
        _huber_partial_kernel[(nb,)](p, t, partials, n, BLOCK=BLOCK)
        return partials.sum() / n
