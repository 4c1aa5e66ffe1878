import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        B = x.shape[0]
        W, b = self.matmul.weight, self.matmul.bias
        if B >= 16:
            # batched GEMM for big batches
            y = torch.bmm(x.unsqueeze(1), W.t().unsqueeze(0).expand(B, -1, -1)).squeeze(1) + b
        else:
            y = torch.stack([torch.mv(W, x[i]) for i in range(B)], dim=0) + b
        y = self.max_pool(y.unsqueeze(1)).squeeze(1)
        return y.sum(dim=1) * self.scale_factor
