import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] >= 8:
            # tanh(x) = 2 * sigmoid(2x) - 1 ; the sigmoid kernel vectorises better
            return torch.sigmoid(2.0 * x).mul_(2.0).sub_(1.0)
        return torch.tanh(x)
