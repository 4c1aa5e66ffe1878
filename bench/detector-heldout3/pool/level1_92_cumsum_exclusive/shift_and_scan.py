import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        # exclusive scan = inclusive scan of the input shifted right by one
        shifted = F.pad(x.narrow(self.dim, 0, x.size(self.dim) - 1), (1, 0))
        return torch.cumsum(shifted, dim=self.dim)
