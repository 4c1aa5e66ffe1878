import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """GroupNorm with a small per-shape plan cache: the number of partial
    reductions per group is tuned once per batch size and reused."""

    def __init__(self, num_features: int, num_groups: int):
        super(ModelNew, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)
        self._plans = {}

    def _plan(self, batch, group_numel):
        key = (batch, group_numel)
        if key not in self._plans:
            work = batch * self.gn.num_groups
            parts = 1
            while work * parts < 128 and group_numel % (parts * 2) == 0:
                parts *= 2
            self._plans[key] = parts
        return self._plans[key]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C = x.shape[0], x.shape[1]
        G = self.gn.num_groups
        xg = x.reshape(B, G, -1)
        n = xg.shape[2]
        parts = self._plan(B, n)
        xs = xg.reshape(B, G, parts, n // parts)
        mean = xs.sum(dim=3).sum(dim=2) / n                           # (B, G)
        var = ((xs - mean[:, :, None, None]) ** 2).sum(dim=3).sum(dim=2) / n
        y = (xg - mean[:, :, None]) * torch.rsqrt(var + self.gn.eps)[:, :, None]
        y = y.reshape_as(x)
        shape = [1, C] + [1] * (x.dim() - 2)
        return y * self.gn.weight.view(shape) + self.gn.bias.view(shape)
