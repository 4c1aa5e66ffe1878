import torch
import torch.nn as nn

_ALPHA = 1.6732632423543772848170429916717
_SCALE = 1.0507009873554804934193349852946


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.clamp_min(x, 0.0)
        neg = torch.clamp_max(x, 0.0)
        return _SCALE * (pos + _ALPHA * torch.expm1(neg))
