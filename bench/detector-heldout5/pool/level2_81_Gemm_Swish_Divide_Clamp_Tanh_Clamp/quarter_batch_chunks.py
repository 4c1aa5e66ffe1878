import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Processes the batch in 4 chunks so the GEMM output stays in L2 for the epilogue."""

    def __init__(self, in_features, out_features, bias=True):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        B = x.shape[0]
        chunk = max(1, (B + 3) // 4)
        outs = []
        for s in range(0, B, chunk):
            y = F.linear(x[s:s + chunk], self.gemm.weight, self.gemm.bias)
            y = y * torch.sigmoid(y) / 2.0
            y = torch.tanh(torch.clamp(y, -1.0, 1.0)).clamp_(-1.0, 1.0)
            outs.append(y)
        return torch.cat(outs, dim=0)
