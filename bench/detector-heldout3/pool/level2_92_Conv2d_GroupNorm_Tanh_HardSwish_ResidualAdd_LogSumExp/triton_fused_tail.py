import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _tail_kernel(conv_ptr, norm_ptr, out_ptr, C, HW, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # grid: (batch, spatial tiles); reduces over channels for BLOCK_S positions
    b = tl.program_id(0)
    ps = tl.program_id(1)
    s = ps * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.arange(0, BLOCK_C)
    m = (c[:, None] < C) & (s[None, :] < HW)
    off = b * C * HW + c[:, None] * HW + s[None, :]
    xc = tl.load(conv_ptr + off, mask=m, other=0.0)
    xn = tl.load(norm_ptr + off, mask=m, other=0.0)
    t = 2.0 / (1.0 + tl.exp(-2.0 * xn)) - 1.0                   # tanh
    hs = t * tl.minimum(tl.maximum(t + 3.0, 0.0), 6.0) / 6.0    # hardswish
    r = tl.where(m, xc + hs, float("-inf"))
    mx = tl.max(r, axis=0)
    lse = mx + tl.log(tl.sum(tl.exp(r - mx[None, :]), axis=0))
    tl.store(out_ptr + b * HW + s, lse, mask=s < HW)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        xc = self.conv(x).contiguous()
        xn = self.group_norm(xc).contiguous()
        B, C, H, W = xc.shape
        HW = H * W
        out = torch.empty(B, 1, H, W, device=x.device, dtype=torch.float32)
        BLOCK_S = 4096
        _tail_kernel[(B, triton.cdiv(HW, BLOCK_S))](xc, xn, out, C, HW,
                                                   BLOCK_C=triton.next_power_of_2(C), BLOCK_S=BLOCK_S)
        return out
