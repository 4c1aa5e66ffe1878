import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """LogSumExp over channels with a single stabiliser (the tensor max) instead of a
    per-voxel max: one scalar reduction instead of a channel-wise one."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.bias = nn.Parameter(torch.randn(1, 1, 1, 1))

    def forward(self, x):
        ct = self.conv_transpose
        ys = [F.conv_transpose3d(x[i:i + 1], ct.weight, ct.bias, stride=ct.stride, padding=ct.padding)
              for i in range(x.shape[0])]
        y = torch.cat(ys, dim=0)
        m = y.max()
        y = m + torch.log(torch.exp(y - m).sum(dim=1, keepdim=True))
        y = y * torch.sigmoid(y + 3) / 6
        return torch.clamp(y - self.bias, min=-1, max=1)
