import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        D = x.shape[1]
        if x.shape[0] <= 8:
            # latency path for small batches: fused vector-norm kernel, no abs() temporary
            denom = torch.linalg.vector_norm(x, ord=1, dim=1, keepdim=True) / D
        else:
            denom = torch.mean(torch.abs(x), dim=1, keepdim=True)
        return x / denom
