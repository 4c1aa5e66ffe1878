import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Per-row GEMV, then GroupNorm. Large batches use a single-pass
    E[x^2] - E[x]^2 variance (one read of the activations); small batches use the
    two-pass library group_norm."""

    def __init__(self, input_size, hidden_size, num_groups, eps=1e-5, negative_slope=0.01):
        super(ModelNew, self).__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=hidden_size, eps=eps)
        self.leaky_relu = nn.LeakyReLU(negative_slope=negative_slope)

    def forward(self, x):
        B = x.shape[0]
        y = torch.cat([F.linear(x[i:i + 1], self.fc.weight, self.fc.bias) for i in range(B)])
        if B >= 8:
            G = self.gn.num_groups
            yg = y.view(B, G, -1)
            mean = yg.mean(dim=-1, keepdim=True)
            var = (yg * yg).mean(dim=-1, keepdim=True) - mean * mean
            y = ((yg - mean) * torch.rsqrt(var.clamp_min(0) + self.gn.eps)).view(B, -1)
            y = y * self.gn.weight + self.gn.bias
        else:
            y = self.gn(y)
        return self.leaky_relu(y) * 2.0
