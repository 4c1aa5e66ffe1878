import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # min is exact, then the first position that equals it (integer work only)
        mn = torch.amin(x, dim=self.dim, keepdim=True)
        hit = (x == mn)
        n = x.shape[self.dim]
        shape = [1] * x.dim()
        shape[self.dim] = n
        pos = torch.arange(n, device=x.device).view(shape)
        big = torch.full_like(pos, n)
        return torch.where(hit, pos, big).amin(dim=self.dim)
