import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    @staticmethod
    def _mish_composed(t):
        return t * torch.tanh(F.softplus(t))

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0)
        act = self._mish_composed if x.shape[0] >= 8 else F.mish
        return act(act(y))
