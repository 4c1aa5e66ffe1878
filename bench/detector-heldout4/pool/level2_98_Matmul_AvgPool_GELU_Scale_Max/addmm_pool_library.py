import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """addmm, then avg-pool as a reshape + mean, GELU * scale, row max."""

    def __init__(self, in_features, out_features, pool_kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.k = pool_kernel_size
        self.scale_factor = scale_factor

    def forward(self, x):
        y = torch.addmm(self.matmul.bias, x, self.matmul.weight.t())
        B, O = y.shape
        y = y[:, :(O // self.k) * self.k].reshape(B, -1, self.k).mean(dim=2)
        y = F.gelu(y) * self.scale_factor
        return y.max(dim=1).values
