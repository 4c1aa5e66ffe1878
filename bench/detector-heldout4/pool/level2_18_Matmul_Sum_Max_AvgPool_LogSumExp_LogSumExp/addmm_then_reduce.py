import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """One addmm for the GEMM, then a single fused row reduction; the size-1
    max / mean / logsumexp steps are dropped."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return y.sum(dim=1, keepdim=True)
