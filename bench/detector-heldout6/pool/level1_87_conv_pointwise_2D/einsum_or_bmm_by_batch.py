import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, bias: bool = False):
        super(ModelNew, self).__init__()
        self.conv1d = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        w = self.conv1d.weight.view(self.conv1d.out_channels, C)
        if B <= 4:
            # tiny batch: let einsum contract channels directly
            return torch.einsum("oc,bchw->bohw", w, x)
        # bigger batch: one batched GEMM over all images
        y = torch.bmm(w.unsqueeze(0).expand(B, -1, -1), x.reshape(B, C, H * W))
        return y.view(B, -1, H, W)
