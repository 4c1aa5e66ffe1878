import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x):
        bias = self.matmul.bias + self.add_value
        w = self.matmul.weight
        out = x.new_empty(x.shape[0], w.shape[0])
        for i in range(x.shape[0]):
            y = torch.addmv(bias, w, x[i])
            y = torch.tanh(y * torch.sigmoid(y))
            out[i] = F.hardtanh(F.gelu(y), -1.0, 1.0)
        return out
