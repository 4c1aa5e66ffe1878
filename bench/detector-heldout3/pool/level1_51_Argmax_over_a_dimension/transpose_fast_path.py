import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] < 16:
            # small batch: make the reduced dim innermost so the scan is contiguous
            xt = x.transpose(self.dim, -1).contiguous()
            return torch.max(xt, dim=-1).indices
        return torch.argmax(x, dim=self.dim)
