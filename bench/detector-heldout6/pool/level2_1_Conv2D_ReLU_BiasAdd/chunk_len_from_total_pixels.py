import torch
import torch.nn as nn


class ModelNew(nn.Module):
    PIXELS_PER_CHUNK = 8192

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        B, _, H, W = x.shape
        total = B * H * W
        n_chunks = max(1, -(-total // self.PIXELS_PER_CHUNK))
        chunk = -(-B // n_chunks)  # images per chunk: depends on the total number of pixels
        outs = []
        for s in range(0, B, chunk):
            outs.append(torch.relu(self.conv(x[s:s + chunk])) + self.bias)
        return torch.cat(outs, 0)
