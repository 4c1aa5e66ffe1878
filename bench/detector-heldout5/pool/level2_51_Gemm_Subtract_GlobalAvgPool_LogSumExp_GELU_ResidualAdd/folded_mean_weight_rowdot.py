import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """mean_j(W x + b - s)_j = x . mean_j(W_j) + mean(b - s): the GEMM collapses to a GEMV
    with the column-mean of W; logsumexp over a single element is the identity."""

    def __init__(self, in_features, out_features, bias=True):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        original_x = x
        w_mean = self.gemm.weight.mean(dim=0)
        c = (self.gemm.bias - self.subtract).mean() if self.gemm.bias is not None else -self.subtract.mean()
        m = (x * w_mean).sum(dim=1, keepdim=True) + c
        return F.gelu(m) + original_x
