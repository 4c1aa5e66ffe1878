import torch
import torch.nn as nn
import torch.nn.functional as F

class ModelNew(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        """
        :param in_channels: Number of input channels
        :param out_channels: Number of output channels
        :param stride: Stride for the first convolutional layer
        :param downsample: Downsample layer for the shortcut connection
        """
        super(ModelNew, self).__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels * self.expansion, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels * self.expansion),
        )
        self.stride = stride

    def forward(self, x):
        def bn(t, m):
            return F.batch_norm(t, m.running_mean, m.running_var, m.weight, m.bias,
                                training=True, momentum=m.momentum, eps=m.eps)

        out = F.relu_(bn(self.conv1(x), self.bn1))
        out = bn(self.conv2(out), self.bn2)
        identity = bn(self.downsample[0](x), self.downsample[1])
        return F.relu_(out.add_(identity))
