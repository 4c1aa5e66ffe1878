import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] >= 8:
            # fused library kernel for big batches
            return F.leaky_relu(x, negative_slope=self.negative_slope)
        # small batches: a single where avoids the dispatcher overhead
        return torch.where(x > 0, x, x * self.negative_slope)
