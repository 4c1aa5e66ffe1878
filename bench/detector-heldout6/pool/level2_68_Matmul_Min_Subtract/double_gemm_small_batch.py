import torch
import torch.nn as nn
import torch.nn.functional as F


def _accum_dtype(batch):
    # latency-bound tiny batches can afford a float64 GEMM
    return torch.float64 if batch < 4 else torch.float32


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x):
        dt = _accum_dtype(x.shape[0])
        y = F.linear(x.to(dt), self.linear.weight.to(dt), self.linear.bias.to(dt)).to(x.dtype)
        y = torch.min(y, self.constant)
        return y - self.constant
