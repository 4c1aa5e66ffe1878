import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() > (1 << 23):
            # one fused expression, fewer temporaries for big inputs
            return x / (1.0 + torch.exp(-x))
        return x * torch.sigmoid(x)
