import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, eps, bias=True):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps)

    def forward(self, x):
        ct, gn = self.conv_transpose, self.group_norm
        out = None
        for i in range(x.shape[0]):
            y = F.conv_transpose3d(x[i:i + 1], ct.weight, ct.bias, stride=ct.stride, padding=ct.padding)
            y = F.silu(y)
            y = F.hardswish(F.group_norm(y, gn.num_groups, gn.weight, gn.bias, gn.eps))
            if out is None:
                out = y.new_empty((x.shape[0],) + tuple(y.shape[1:]))
            out[i] = y[0]
        return out
