import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        # stride 1, no padding: every input pixel meets every kernel tap, so
        # mean(convT(x))[o] = sum_i sum(x[i]) * sum(W[i, o]) / (OH*OW) + b[o]
        w = self.conv_transpose.weight  # (Cin, Cout, k, k)
        k = w.shape[-1]
        B, Cin, H, W = x.shape
        area = (H + k - 1) * (W + k - 1)
        wsum = w.sum(dim=(2, 3))  # (Cin, Cout)
        extra = self.conv_transpose.bias + self.bias.view(-1)
        out = torch.empty((B, 1), device=x.device, dtype=x.dtype)
        for i in range(B):
            xs = x[i].sum(dim=(1, 2))  # (Cin,)
            g = torch.mv(wsum.t(), xs) / area + extra
            out[i, 0] = torch.logsumexp(g, dim=0) * 10.0
        return out
