import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """addmm, in-place exact GELU, softmax written as exp(x - max) / sum."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        y = F.gelu(y)
        y = torch.exp(y - y.amax(dim=1, keepdim=True))
        return y / y.sum(dim=1, keepdim=True)
