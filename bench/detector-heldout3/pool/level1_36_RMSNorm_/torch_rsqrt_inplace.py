import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # one reduction pass + a broadcasted multiply by the reciprocal RMS
        ms = torch.mean(x * x, dim=1, keepdim=True)
        return x * torch.rsqrt(ms.add_(self.eps))
