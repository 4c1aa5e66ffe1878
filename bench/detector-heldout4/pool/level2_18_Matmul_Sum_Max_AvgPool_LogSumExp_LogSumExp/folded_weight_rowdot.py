import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j: fold the GEMM + row-sum
    into one GEMV against the column-summed weight. The max / mean / logsumexp
    that follow act on a (B, 1) tensor and are identities."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w_sum = self.linear.weight.sum(dim=0)          # (in_features,)
        b_sum = self.linear.bias.sum()
        out = (x * w_sum).sum(dim=1, keepdim=True) + b_sum
        return out
