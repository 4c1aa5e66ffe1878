import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Two-level scan. When the batch has too few rows, each row is cut into
    segments that are scanned independently, then segment totals are scanned
    and added back as offsets."""

    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.min_parallel = 64

    def forward(self, x):
        R, N = x.shape
        segs = 1
        while R * segs < self.min_parallel and N % (segs * 2) == 0:
            segs *= 2
        if segs == 1:
            return torch.cumsum(x, dim=1)
        xs = x.reshape(R, segs, N // segs)
        local = torch.cumsum(xs, dim=2)
        totals = local[:, :, -1]
        offsets = torch.cumsum(totals, dim=1) - totals          # exclusive scan of totals
        return (local + offsets.unsqueeze(2)).reshape(R, N)
