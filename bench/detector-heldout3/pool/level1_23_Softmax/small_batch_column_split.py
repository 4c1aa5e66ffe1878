import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Softmax over dim=1. With few rows there is not enough row-level
    parallelism, so each row is cut into column segments whose partial
    max / sum-of-exp are computed independently and then merged."""

    def __init__(self):
        super(ModelNew, self).__init__()
        self.target_parallelism = 64

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        splits = 1
        while n_rows * splits < self.target_parallelism and n_cols % (splits * 2) == 0 and splits < 16:
            splits *= 2
        if splits == 1:
            return torch.softmax(x, dim=1)
        seg = x.view(n_rows, splits, n_cols // splits)
        seg_max = seg.amax(dim=2, keepdim=True)                     # (R, S, 1)
        seg_sum = torch.exp(seg - seg_max).sum(dim=2, keepdim=True)  # (R, S, 1)
        row_max = seg_max.amax(dim=1, keepdim=True)                 # (R, 1, 1)
        row_sum = (seg_sum * torch.exp(seg_max - row_max)).sum(dim=1, keepdim=True)
        out = torch.exp(seg - row_max) / row_sum
        return out.view(n_rows, n_cols)
