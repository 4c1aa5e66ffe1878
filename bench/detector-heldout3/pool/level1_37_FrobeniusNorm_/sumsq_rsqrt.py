import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # one global reduction, then a multiply by the reciprocal norm
        inv = torch.rsqrt(torch.sum(x * x))
        return x * inv
