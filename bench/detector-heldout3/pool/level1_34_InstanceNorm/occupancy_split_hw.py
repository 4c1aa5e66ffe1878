import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """InstanceNorm with the per-plane reduction split into partial sums when
    there are too few (sample, channel) planes to keep every core busy."""

    def __init__(self, num_features: int):
        super(ModelNew, self).__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)
        self.min_work_items = 256

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        HW = H * W
        planes = B * C
        splits = max(1, self.min_work_items // planes)
        while HW % splits != 0:
            splits -= 1
        xp = x.reshape(planes, splits, HW // splits)
        part_sum = xp.sum(dim=2)                        # (P, S)
        mean = part_sum.sum(dim=1) / HW                 # (P,)
        d = xp - mean[:, None, None]
        var = (d * d).sum(dim=2).sum(dim=1) / HW
        rstd = torch.rsqrt(var + self.inorm.eps)
        y = d * rstd[:, None, None]
        return y.reshape(B, C, H, W)
