import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # large batches are processed in fixed groups of 256 rows to bound the
        # temporary; each row's reduction is the same whatever group it is in
        if x.shape[0] > 256:
            return torch.cat([self._lsm(c) for c in torch.split(x, 256, dim=0)], dim=0)
        return self._lsm(x)

    def _lsm(self, x):
        m = x.amax(dim=self.dim, keepdim=True)
        z = x - m
        return z - torch.log(torch.exp(z).sum(dim=self.dim, keepdim=True))
