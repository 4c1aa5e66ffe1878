import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rowdot_splitk_kernel(x_ptr, w_ptr, out_ptr, K, K_PER_SPLIT, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    k0 = split * K_PER_SPLIT
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for kk in range(0, K_PER_SPLIT, BLOCK_K):
        cols = k0 + kk + tl.arange(0, BLOCK_K)
        mask = cols < K
        xv = tl.load(x_ptr + row * K + cols, mask=mask, other=0.0)
        wv = tl.load(w_ptr + cols, mask=mask, other=0.0)
        acc += xv * wv
    tl.atomic_add(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    """Folded GEMV (x . colsum(W)) in Triton. With a small batch there are too few
    rows to fill the GPU, so K is split across programs and combined with atomics."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        B, K = x.shape
        w_sum = self.linear.weight.sum(dim=0).contiguous()
        split = 8 if B < 16 else 1
        k_per_split = triton.cdiv(K, split)
        out = torch.zeros(B, device=x.device, dtype=torch.float32)
        _rowdot_splitk_kernel[(B, split)](x, w_sum, out, K, k_per_split, BLOCK_K=1024)
        return (out + self.linear.bias.sum()).unsqueeze(1)
