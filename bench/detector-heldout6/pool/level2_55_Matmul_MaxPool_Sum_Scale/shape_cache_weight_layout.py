import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor
        self.kernel_size = kernel_size
        self._cache = {}

    def _weight_for(self, shape):
        # cache a contiguous copy of W per (shape, dtype): pure layout, no numerical change
        key = (shape, self.matmul.weight.dtype)
        if key not in self._cache:
            self._cache[key] = self.matmul.weight.detach().contiguous().clone()
        return self._cache[key]

    def forward(self, x):
        W = self._weight_for(tuple(x.shape))
        b = self.matmul.bias
        B = x.shape[0]
        npool = W.shape[0] // self.kernel_size
        out = torch.empty((B,), device=x.device, dtype=x.dtype)
        for i in range(B):
            y = torch.addmv(b, W, x[i])
            out[i] = y[: npool * self.kernel_size].view(npool, self.kernel_size).amax(dim=1).sum() * self.scale_factor
        return out
