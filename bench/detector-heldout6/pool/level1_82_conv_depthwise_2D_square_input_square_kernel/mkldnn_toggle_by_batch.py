import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = False):
        super(ModelNew, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                groups=in_channels, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # oneDNN only pays off for larger batches; use the native kernel otherwise
        with torch.backends.mkldnn.flags(enabled=x.shape[0] >= 8):
            return self.conv2d(x)
