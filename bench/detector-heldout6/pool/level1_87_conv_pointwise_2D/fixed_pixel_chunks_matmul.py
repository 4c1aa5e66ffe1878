import torch
import torch.nn as nn


class ModelNew(nn.Module):
    CHUNK = 4096  # pixels per GEMM, independent of the batch

    def __init__(self, in_channels: int, out_channels: int, bias: bool = False):
        super(ModelNew, self).__init__()
        self.conv1d = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        COUT = self.conv1d.out_channels
        w = self.conv1d.weight.reshape(COUT, C)
        xf = x.reshape(B, C, H * W)
        out = torch.empty((B, COUT, H * W), device=x.device, dtype=x.dtype)
        for b in range(B):
            for s in range(0, H * W, self.CHUNK):
                out[b, :, s:s + self.CHUNK] = torch.mm(w, xf[b, :, s:s + self.CHUNK])
        return out.view(B, COUT, H, W)
