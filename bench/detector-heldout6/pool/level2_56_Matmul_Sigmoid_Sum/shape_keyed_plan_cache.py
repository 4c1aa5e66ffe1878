import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)
        self._plans = {}

    def _plan(self, shape):
        # cached per input shape; a cheap heuristic stands in for a timing run
        if shape not in self._plans:
            self._plans[shape] = "gemm" if shape[0] >= 4 else "gemv"
        return self._plans[shape]

    def forward(self, x):
        W, b = self.linear.weight, self.linear.bias
        if self._plan(tuple(x.shape)) == "gemm":
            y = F.linear(x, W, b)
        else:
            y = torch.stack([torch.addmv(b, W, x[i]) for i in range(x.shape[0])], 0)
        return torch.sigmoid(y).sum(dim=1, keepdim=True)
