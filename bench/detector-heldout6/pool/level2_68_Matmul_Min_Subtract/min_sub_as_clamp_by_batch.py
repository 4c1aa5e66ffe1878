import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x):
        B = x.shape[0]
        W, b = self.linear.weight, self.linear.bias
        y = torch.stack([torch.addmv(b, W, x[i]) for i in range(B)], 0)
        c = self.constant
        if B >= 8:
            # min(y, c) - c == clamp_max(y - c, 0)?  computed as min first to stay exact
            return torch.clamp_max(y, c) - c
        return torch.minimum(y, c) - c
