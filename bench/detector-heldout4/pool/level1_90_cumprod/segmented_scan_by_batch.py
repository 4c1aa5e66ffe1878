import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Two-level (segmented) scan: cumprod inside fixed-length segments, then
    multiply each segment by the exclusive product of the segments before it.
    Short segments when the batch is small (more independent work per row)."""

    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        x = x.movedim(self.dim, -1).contiguous()
        shape = x.shape
        B = shape[0]
        n = shape[-1]
        seg = 32 if B <= 4 else 256
        if n % seg != 0:
            return torch.cumprod(x, dim=-1).movedim(-1, self.dim)
        xs = x.reshape(-1, n // seg, seg)
        local = torch.cumprod(xs, dim=-1)
        totals = local[..., -1]
        carry = torch.cumprod(totals, dim=-1)
        carry = torch.cat([torch.ones_like(carry[..., :1]), carry[..., :-1]], dim=-1)
        out = local * carry.unsqueeze(-1)
        return out.reshape(shape).movedim(-1, self.dim)
