import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _lin_min_sub_kernel(x_ptr, w_ptr, b_ptr, c_ptr, out_ptr, M, IN, OUT,
                        BLOCK_M: tl.constexpr, BLOCK_IN: tl.constexpr, BLOCK_OUT: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    k = tl.arange(0, BLOCK_IN)
    mm = rm < M
    c = tl.load(c_ptr)
    for j in range(0, OUT):
        wv = tl.load(w_ptr + j * IN + k, mask=k < IN, other=0.0)
        xv = tl.load(x_ptr + rm[:, None] * IN + k[None, :], mask=mm[:, None] & (k[None, :] < IN), other=0.0)
        y = tl.sum(xv * wv[None, :], axis=1) + tl.load(b_ptr + j)
        y = tl.minimum(y, c) - c
        tl.store(out_ptr + rm * OUT + j, y, mask=mm)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x):
        x = x.contiguous()
        M, IN = x.shape
        OUT = self.linear.out_features
        BLOCK_M = {1: 1, 2: 2, 3: 4, 4: 4}.get(M, 16)
        out = torch.empty((M, OUT), device=x.device, dtype=x.dtype)
        _lin_min_sub_kernel[(triton.cdiv(M, BLOCK_M),)](x, self.linear.weight.contiguous(), self.linear.bias,
                                                         self.constant.reshape(1), out, M, IN, OUT,
                                                         BLOCK_M=BLOCK_M, BLOCK_IN=triton.next_power_of_2(IN),
                                                         BLOCK_OUT=triton.next_power_of_2(OUT))
        return out
