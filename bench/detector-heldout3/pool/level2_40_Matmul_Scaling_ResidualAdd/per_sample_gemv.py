import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        # stream samples one at a time (weight stays hot in cache); the batch
        # size only sets the trip count
        out = x.new_empty(x.shape[0], self.matmul.out_features)
        for i in range(x.shape[0]):
            y = F.linear(x[i:i + 1], self.matmul.weight, self.matmul.bias)
            out[i:i + 1] = y * self.scaling_factor + y
        return out
