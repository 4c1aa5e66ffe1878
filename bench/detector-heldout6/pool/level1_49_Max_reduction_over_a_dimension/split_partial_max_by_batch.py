import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        # more splits for small batches to expose parallelism
        splits = 8 if B < 4 else (4 if B < 16 else 2)
        parts = torch.chunk(x, splits, dim=self.dim)
        partial = torch.stack([p.amax(dim=self.dim) for p in parts], dim=0)
        return partial.amax(dim=0)
