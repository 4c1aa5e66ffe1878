import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Process the batch in fixed chunks of 4 rows to bound the working set."""

    CHUNK = 4

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for s in range(0, x.shape[0], self.CHUNK):
            out[s:s + self.CHUNK] = F.gelu(x[s:s + self.CHUNK])
        return out
