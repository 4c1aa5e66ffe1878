import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _gelu_softmax_row_kernel(y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(y_ptr + row * N + cols, mask=mask, other=0.0)
    g = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    g = tl.where(mask, g, -float("inf"))
    m = tl.max(g, axis=0)
    e = tl.exp(g - m)
    e = tl.where(mask, e, 0.0)
    s = tl.sum(e, axis=0)
    tl.store(out_ptr + row * N + cols, e / s, mask=mask)


class ModelNew(nn.Module):
    """Per-sample GEMV for the linear layer, then a one-program-per-row Triton
    kernel fusing GELU and softmax over the whole row."""

    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        B = x.shape[0]
        y = torch.cat([F.linear(x[i:i + 1], self.linear.weight, self.linear.bias) for i in range(B)])
        y = y.contiguous()
        N = y.shape[1]
        out = torch.empty_like(y)
        _gelu_softmax_row_kernel[(B,)](y, out, N, BLOCK=triton.next_power_of_2(N))
        return out
