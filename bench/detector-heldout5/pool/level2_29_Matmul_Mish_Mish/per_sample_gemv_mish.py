import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        out = x.new_empty(x.shape[0], w.shape[0])
        for i in range(x.shape[0]):
            y = torch.addmv(b, w, x[i])
            out[i] = F.mish(F.mish(y))
        return out
