import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """conv_transpose2d, training-mode batch_norm, tanh, 2x2 max pool, group_norm."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, num_groups):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.batch_norm = nn.BatchNorm2d(out_channels)
        self.tanh = nn.Tanh()
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        y = self.conv_transpose(x)
        bn = self.batch_norm
        y = F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=self.training,
                         momentum=bn.momentum, eps=bn.eps)
        y = F.max_pool2d(torch.tanh(y), 2, 2)
        return F.group_norm(y, self.group_norm.num_groups, self.group_norm.weight, self.group_norm.bias,
                            self.group_norm.eps)
