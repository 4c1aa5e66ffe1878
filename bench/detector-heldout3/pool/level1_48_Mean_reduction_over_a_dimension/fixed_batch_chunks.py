import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[self.dim]
        if x.shape[0] >= 32:
            # stream big batches through a fixed 4-sample working set
            return torch.cat([c.sum(dim=self.dim) for c in torch.split(x, 4, dim=0)], dim=0) * (1.0 / n)
        return x.sum(dim=self.dim) * (1.0 / n)
