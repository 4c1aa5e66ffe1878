import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        # vendor GEMM with the bias folded in (addmm), then one fused elementwise pass
        y = torch.addmm(self.matmul.bias, x, self.matmul.weight.t())
        y = F.silu(y) + self.bias
        return F.group_norm(y, self.group_norm.num_groups, self.group_norm.weight, self.group_norm.bias,
                            self.group_norm.eps)
