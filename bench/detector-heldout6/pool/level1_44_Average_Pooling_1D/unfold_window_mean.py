import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super(ModelNew, self).__init__()
        self.k, self.s, self.p = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xp = F.pad(x, (self.p, self.p))
        win = xp.unfold(-1, self.k, self.s)  # (B, C, OL, K) view
        acc = win[..., 0].clone()
        for i in range(1, self.k):
            acc += win[..., i]
        return acc / self.k
