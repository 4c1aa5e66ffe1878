import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        bs, M, K = A.shape
        # few matrices -> not enough independent tiles; split K to expose parallelism
        split_k = 4 if bs < 16 else 1
        if split_k == 1:
            return torch.bmm(A, B)
        kc = K // split_k
        out = torch.bmm(A[:, :, :kc], B[:, :kc, :])
        for s in range(1, split_k):
            out = torch.baddbmm(out, A[:, :, s * kc:(s + 1) * kc], B[:, s * kc:(s + 1) * kc, :])
        return out
