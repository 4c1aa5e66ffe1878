import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _triplet_row_kernel(a_ptr, p_ptr, n_ptr, out_ptr, D, margin, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc_p = tl.zeros((BLOCK,), dtype=tl.float32)
    acc_n = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < D
        a = tl.load(a_ptr + row * D + cols, mask=mask, other=0.0)
        p = tl.load(p_ptr + row * D + cols, mask=mask, other=0.0)
        n = tl.load(n_ptr + row * D + cols, mask=mask, other=0.0)
        dp = tl.where(mask, a - p + eps, 0.0)
        dn = tl.where(mask, a - n + eps, 0.0)
        acc_p += dp * dp
        acc_n += dn * dn
    d_ap = tl.sqrt(tl.sum(acc_p, axis=0))
    d_an = tl.sqrt(tl.sum(acc_n, axis=0))
    tl.store(out_ptr + row, tl.maximum(d_ap - d_an + margin, 0.0))


class ModelNew(nn.Module):
    def __init__(self, margin=1.0):
        super(ModelNew, self).__init__()
        self.margin = margin

    def forward(self, anchor, positive, negative):
        a = anchor.contiguous()
        p = positive.contiguous()
        n = negative.contiguous()
        B, D = a.shape
        per_row = torch.empty(B, device=a.device, dtype=torch.float32)
        _triplet_row_kernel[(B,)](a, p, n, per_row, D, float(self.margin), 1e-6, BLOCK=4096)
        return per_row.mean()
