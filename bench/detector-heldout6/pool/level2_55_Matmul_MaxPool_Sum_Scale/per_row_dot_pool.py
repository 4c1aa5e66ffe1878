import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor
        self.kernel_size = kernel_size

    def forward(self, x):
        W, b = self.matmul.weight, self.matmul.bias
        B = x.shape[0]
        out = torch.empty((B,), device=x.device, dtype=x.dtype)
        npool = W.shape[0] // self.kernel_size
        for i in range(B):
            y = torch.mv(W, x[i]) + b
            y = y[: npool * self.kernel_size].view(npool, self.kernel_size).amax(dim=1)
            out[i] = y.sum() * self.scale_factor
        return out
