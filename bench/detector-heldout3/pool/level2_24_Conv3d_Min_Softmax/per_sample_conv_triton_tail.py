import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _min_softmax_kernel(y_ptr, out_ptr, C, D, HW, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # y: (B, C, D, HW). min over D, then softmax over C. grid: (B, cdiv(HW, BLOCK_S))
    b = tl.program_id(0)
    ps = tl.program_id(1)
    s = ps * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.arange(0, BLOCK_C)
    m = (c[:, None] < C) & (s[None, :] < HW)
    base = b * C * D * HW + c[:, None] * D * HW + s[None, :]
    mn = tl.full((BLOCK_C, BLOCK_S), float("inf"), tl.float32)
    for d in range(0, D):
        mn = tl.minimum(mn, tl.load(y_ptr + base + d * HW, mask=m, other=float("inf")))
    mn = tl.where(m, mn, float("-inf"))
    mx = tl.max(mn, axis=0)
    e = tl.exp(mn - mx[None, :])
    e = tl.where(m, e, 0.0)
    p = e / tl.sum(e, axis=0)[None, :]
    tl.store(out_ptr + b * C * HW + c[:, None] * HW + s[None, :], p, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        # convolve sample by sample: bounds the im2col workspace and keeps every
        # sample on the same conv algorithm
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], dim=0).contiguous()
        B, C, D, H, W = y.shape
        out = torch.empty(B, C, H, W, device=x.device, dtype=torch.float32)
        HW = H * W
        BLOCK_S = 1024
        _min_softmax_kernel[(B, triton.cdiv(HW, BLOCK_S))](y, out, C, D, HW,
                                                           BLOCK_C=triton.next_power_of_2(C), BLOCK_S=BLOCK_S)
        return out
