import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Batches of 4+: im2col (unfold) + one big GEMM over all output pixels of the
    batch, which beats the direct conv there; small batches call conv2d."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        B, Cin, H, W = x.shape
        k = self.conv.kernel_size[0]
        if B >= 4:
            Ho, Wo = H - k + 1, W - k + 1
            cols = F.unfold(x, k)                                    # (B, Cin*k*k, Ho*Wo)
            cols = cols.transpose(1, 2).reshape(B * Ho * Wo, -1)
            w = self.conv.weight.view(self.conv.out_channels, -1)
            y = torch.addmm(self.conv.bias, cols, w.t())
            y = y.view(B, Ho, Wo, -1).permute(0, 3, 1, 2).contiguous()
        else:
            y = self.conv(x)
        return torch.relu(F.hardswish(y))
