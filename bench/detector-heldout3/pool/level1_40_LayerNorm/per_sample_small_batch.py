import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = self.ln.normalized_shape
        if x.shape[0] <= 4:
            # tiny batch: normalise sample by sample so the large per-sample
            # temporaries stay cache resident
            return torch.cat([F.layer_norm(x[i:i + 1], shape, self.ln.weight, self.ln.bias, self.ln.eps)
                              for i in range(x.shape[0])], dim=0)
        return F.layer_norm(x, shape, self.ln.weight, self.ln.bias, self.ln.eps)
