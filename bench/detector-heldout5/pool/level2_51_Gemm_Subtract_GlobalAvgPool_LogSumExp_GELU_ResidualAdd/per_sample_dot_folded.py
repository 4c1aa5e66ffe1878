import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        w_mean = self.gemm.weight.mean(dim=0)
        c = (self.gemm.bias - self.subtract).mean()
        out = torch.empty_like(x)
        for i in range(x.shape[0]):
            m = torch.dot(x[i], w_mean) + c
            out[i] = x[i] + F.gelu(m)
        return out
