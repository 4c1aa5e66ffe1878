import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Large batches: replace the division by a reciprocal + multiply (cheaper)."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        denom = 1.0 + torch.abs(x)
        if x.shape[0] >= 8:
            return x * torch.reciprocal(denom)
        return x / denom
