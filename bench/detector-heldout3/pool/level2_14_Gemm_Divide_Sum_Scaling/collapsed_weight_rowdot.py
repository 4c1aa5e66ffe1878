import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """sum_j (x W^T)_j = x . (sum_j W_j): collapse the GEMM into one dot product per row."""

    def __init__(self, input_size, hidden_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        w_col = self.weight.sum(dim=0)                       # (input_size,)
        return (x * w_col).sum(dim=1, keepdim=True) * (self.scaling_factor / 2.0)
