import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps
        # above this many elements the elementwise square materialises too much
        # memory; switch to a contraction that never builds x**2
        self.big_numel = 1 << 24

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() > self.big_numel:
            ss = torch.einsum("bchw,bchw->bhw", x, x).unsqueeze(1)
            rms = torch.sqrt(ss / self.num_features + self.eps)
        else:
            rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms
