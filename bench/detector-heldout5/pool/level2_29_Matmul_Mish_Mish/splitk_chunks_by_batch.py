import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Split-K GEMM; more K-chunks when the batch is large to keep the working set in cache."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        B, K = x.shape
        n_chunks = 1 if B == 1 else (2 if B < 8 else 4)
        ck = K // n_chunks
        acc = b.unsqueeze(0).expand(B, -1).clone()
        for c in range(n_chunks):
            for i in range(B):
                acc[i] += torch.mv(w[:, c * ck:(c + 1) * ck], x[i, c * ck:(c + 1) * ck])
        return F.mish(F.mish(acc))
