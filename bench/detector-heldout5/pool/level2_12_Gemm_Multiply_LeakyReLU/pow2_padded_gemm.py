import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Pads the batch to the next power of two so the GEMM hits a tuned shape."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        B = x.shape[0]
        Bp = 1 << (B - 1).bit_length()
        if Bp != B:
            x = torch.cat([x, x.new_zeros(Bp - B, x.shape[1])], dim=0)
        y = F.linear(x, self.gemm.weight, self.gemm.bias)[:B]
        return F.leaky_relu(y * self.multiplier, self.negative_slope)
