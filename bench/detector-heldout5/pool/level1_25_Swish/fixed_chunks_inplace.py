import torch
import torch.nn as nn


class ModelNew(nn.Module):
    CHUNK = 3

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for s in range(0, x.shape[0], self.CHUNK):
            xc = x[s:s + self.CHUNK]
            torch.mul(xc, torch.sigmoid(xc), out=out[s:s + self.CHUNK])
        return out
