import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Split each row into segments to get more parallel work when the batch is
    small: scan each segment, then add the totals of the segments to its right."""

    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        xt = x.movedim(self.dim, -1).contiguous()
        B = x.shape[0]
        n = xt.shape[-1]
        nseg = 1 << max(0, 5 - B.bit_length())  # 32 segments at batch 1, 1 from batch 32 on
        if nseg == 1 or n % nseg != 0:
            out = torch.cumsum(xt.flip(-1), dim=-1).flip(-1)
            return out.movedim(-1, self.dim)
        xs = xt.reshape(-1, nseg, n // nseg)
        local = torch.cumsum(xs.flip(-1), dim=-1).flip(-1)       # suffix sums inside segments
        seg_tot = local[..., 0]
        right = torch.cumsum(seg_tot.flip(-1), dim=-1).flip(-1) - seg_tot  # sum of segments to the right
        out = local + right.unsqueeze(-1)
        return out.reshape(xt.shape).movedim(-1, self.dim)
