import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _chan_stats_kernel(x_ptr, sum_ptr, sq_ptr, B, C, HW, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), tl.float32)
    q = tl.zeros((BLOCK,), tl.float32)
    for b in range(0, B):
        for start in range(0, HW, BLOCK):
            idx = start + offs
            v = tl.load(x_ptr + b * C * HW + c * HW + idx, mask=idx < HW, other=0.0)
            s += v
            q += v * v
    tl.store(sum_ptr + c, tl.sum(s, axis=0))
    tl.store(sq_ptr + c, tl.sum(q, axis=0))


@triton.jit
def _affine_kernel(x_ptr, y_ptr, a_ptr, b_ptr, C, HW, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    c = (offs // HW) % C
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    a = tl.load(a_ptr + c, mask=m, other=0.0)
    b = tl.load(b_ptr + c, mask=m, other=0.0)
    tl.store(y_ptr + offs, v * a + b, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = self.conv(x).contiguous()
        B, C, H, W = y.shape
        HW = H * W
        s = torch.empty(C, device=y.device, dtype=torch.float32)
        q = torch.empty(C, device=y.device, dtype=torch.float32)
        _chan_stats_kernel[(C,)](y, s, q, B, C, HW, BLOCK=16384)
        cnt = B * HW
        mean = s / cnt
        var = q / cnt - mean * mean
        bn = self.bn
        with torch.no_grad():
            bn.num_batches_tracked += 1
            bn.running_mean.mul_(1 - bn.momentum).add_(mean, alpha=bn.momentum)
            bn.running_var.mul_(1 - bn.momentum).add_(var * cnt / max(cnt - 1, 1), alpha=bn.momentum)
        a = bn.weight * torch.rsqrt(var + bn.eps) * self.scaling_factor
        b = (bn.bias - mean * bn.weight * torch.rsqrt(var + bn.eps)) * self.scaling_factor
        out = torch.empty_like(y)
        n = y.numel()
        _affine_kernel[(triton.cdiv(n, 131072),)](y, out, a, b, C, HW, n, BLOCK=131072)
        return out
