import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        B, K = x.shape
        w_col = self.weight.sum(dim=0)
        # reduce each row in `splits` independent chunks; use more chunks when the
        # batch is small so that the reduction still spreads over many workers
        splits = 1
        while B * splits < 64 and K % (splits * 2) == 0:
            splits *= 2
        prod = (x * w_col).view(B, splits, K // splits)
        return prod.sum(dim=2).sum(dim=1, keepdim=True) * (self.scaling_factor / 2.0)
