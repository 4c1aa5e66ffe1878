import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Fewer temporaries: abs, in-place add, one division."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = torch.abs(x)
        d.add_(1.0)
        return torch.div(x, d)
