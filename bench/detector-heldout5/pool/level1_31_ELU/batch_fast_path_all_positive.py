import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super(ModelNew, self).__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # fast path: if no element of the batch is negative, ELU is the identity
        if bool((x >= 0).all()):
            return x.clone()
        return F.elu(x, alpha=self.alpha)
