import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """AvgPool1d(k) after a linear layer is a linear layer with the weight rows
    averaged in groups of k: a 16x smaller GEMV per sample, then GELU, scale, max."""

    def __init__(self, in_features, out_features, pool_kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.pool_kernel_size = pool_kernel_size
        self.scale_factor = scale_factor

    def forward(self, x):
        k = self.pool_kernel_size
        O, K = self.matmul.weight.shape
        n_out = O // k
        w = self.matmul.weight[:n_out * k].view(n_out, k, K).mean(dim=1)
        b = self.matmul.bias[:n_out * k].view(n_out, k).mean(dim=1)
        y = torch.cat([F.linear(x[i:i + 1], w, b) for i in range(x.shape[0])])
        y = F.gelu(y) * self.scale_factor
        return y.max(dim=1).values
