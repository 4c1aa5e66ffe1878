import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super(ModelNew, self).__init__()
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x):
        B, C, H, W = x.shape
        if B <= 2:
            # latency path: explicit im2col + one GEMM beats the conv heuristics at tiny batch
            cols = F.unfold(x, kernel_size=11, stride=4, padding=2)       # (B, C*121, L)
            w = self.conv1.weight.view(96, -1)
            out = torch.matmul(w, cols) + self.conv1.bias.view(1, 96, 1)
            Ho = (H + 4 - 11) // 4 + 1
            Wo = (W + 4 - 11) // 4 + 1
            return out.view(B, 96, Ho, Wo)
        return self.conv1(x)
