import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] >= 16:
            return torch.clamp(x, -1.0, 1.0)
        # small batches: two in-place passes on a copy
        y = x.clone()
        y.clamp_min_(-1.0)
        y.clamp_max_(1.0)
        return y
