import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, multiply_weight_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiply_weight = nn.Parameter(torch.randn(multiply_weight_shape))

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        gn = self.group_norm
        out = x.new_empty(x.shape[0], w.shape[0])
        for i in range(x.shape[0]):
            y = torch.addmv(b, w, x[i]).unsqueeze(0)
            y = F.group_norm(y, gn.num_groups, gn.weight, gn.bias, gn.eps)
            y = y * torch.sigmoid(y) * self.multiply_weight
            out[i] = (y * torch.sigmoid(y))[0]
        return out
