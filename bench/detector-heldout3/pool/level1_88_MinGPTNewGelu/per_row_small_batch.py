import math
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.c = math.sqrt(2.0 / math.pi)

    def _gelu(self, x):
        return 0.5 * x * (1.0 + torch.tanh(self.c * (x + 0.044715 * torch.pow(x, 3.0))))

    def forward(self, x):
        if x.shape[0] <= 16:
            out = torch.empty_like(x)
            for i in range(x.shape[0]):
                out[i] = self._gelu(x[i])
            return out
        return self._gelu(x)
