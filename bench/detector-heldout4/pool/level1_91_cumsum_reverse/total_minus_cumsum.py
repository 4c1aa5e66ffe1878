import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Avoid the two flips: suffix_sum[i] = total - prefix_sum[i] + x[i]."""

    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        c = torch.cumsum(x, dim=self.dim)
        total = c.narrow(self.dim, x.shape[self.dim] - 1, 1)
        return total - c + x
