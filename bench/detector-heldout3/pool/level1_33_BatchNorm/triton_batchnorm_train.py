import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bn_stats_kernel(x_ptr, mean_ptr, var_ptr, B, C, HW, BLOCK: tl.constexpr):
    # one program per channel; reduces over (batch, H, W)
    c = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), tl.float32)
    for b in range(0, B):
        base = b * C * HW + c * HW
        for start in range(0, HW, BLOCK):
            idx = start + offs
            s += tl.load(x_ptr + base + idx, mask=idx < HW, other=0.0)
    n = B * HW
    mean = tl.sum(s, axis=0) / n
    sq = tl.zeros((BLOCK,), tl.float32)
    for b in range(0, B):
        base = b * C * HW + c * HW
        for start in range(0, HW, BLOCK):
            idx = start + offs
            v = tl.load(x_ptr + base + idx, mask=idx < HW, other=0.0)
            d = tl.where(idx < HW, v - mean, 0.0)
            sq += d * d
    tl.store(mean_ptr + c, mean)
    tl.store(var_ptr + c, tl.sum(sq, axis=0) / n)


@triton.jit
def _bn_apply_kernel(x_ptr, y_ptr, scale_ptr, shift_ptr, C, HW, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < numel
    c = (offs // HW) % C
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    sc = tl.load(scale_ptr + c, mask=m, other=0.0)
    sh = tl.load(shift_ptr + c, mask=m, other=0.0)
    tl.store(y_ptr + offs, v * sc + sh, mask=m)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super(ModelNew, self).__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        HW = H * W
        mean = torch.empty(C, device=x.device, dtype=torch.float32)
        var = torch.empty(C, device=x.device, dtype=torch.float32)
        _bn_stats_kernel[(C,)](x, mean, var, B, C, HW, BLOCK=65536)
        bn = self.bn
        if bn.training and bn.track_running_stats:
            n = B * HW
            with torch.no_grad():
                bn.num_batches_tracked += 1
                bn.running_mean.mul_(1 - bn.momentum).add_(mean, alpha=bn.momentum)
                bn.running_var.mul_(1 - bn.momentum).add_(var * n / max(n - 1, 1), alpha=bn.momentum)
        scale = bn.weight * torch.rsqrt(var + bn.eps)
        shift = bn.bias - mean * scale
        y = torch.empty_like(x)
        numel = x.numel()
        _bn_apply_kernel[(triton.cdiv(numel, 262144),)](x, y, scale, shift, C, HW, numel, BLOCK=262144)
        return y
