import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super(ModelNew, self).__init__()
        self.k, self.s, self.p = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] < 8:
            return F.avg_pool1d(x, self.k, self.s, self.p)
        # large batch: O(L) window sums from a prefix sum along the length
        xp = F.pad(x, (self.p, self.p))
        cs = F.pad(torch.cumsum(xp, dim=-1), (1, 0))
        L = xp.shape[-1]
        starts = torch.arange(0, L - self.k + 1, self.s, device=x.device)
        win = cs[..., starts + self.k] - cs[..., starts]
        return win / self.k
