import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] >= 4:
            # multiply-add form (one FMA-friendly op, no division)
            return torch.clamp(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)
        return torch.nn.functional.hardsigmoid(x)
