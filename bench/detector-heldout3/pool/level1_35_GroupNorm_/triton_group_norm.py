import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gn_stats_kernel(x_ptr, mean_ptr, rstd_ptr, group_numel, eps, BLOCK: tl.constexpr):
    # one program per (sample, group); fixed tile loop over the group
    pid = tl.program_id(0)
    base = pid * group_numel
    offs = tl.arange(0, BLOCK)
    s = tl.zeros((BLOCK,), tl.float32)
    ss = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, group_numel, BLOCK):
        idx = start + offs
        v = tl.load(x_ptr + base + idx, mask=idx < group_numel, other=0.0)
        s += v
        ss += v * v
    mean = tl.sum(s, axis=0) / group_numel
    var = tl.sum(ss, axis=0) / group_numel - mean * mean
    tl.store(mean_ptr + pid, mean)
    tl.store(rstd_ptr + pid, 1.0 / tl.sqrt(var + eps))


@triton.jit
def _gn_apply_kernel(x_ptr, y_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, C, HW, G, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    v = tl.load(x_ptr + offs, mask=mask, other=0.0)
    c = (offs // HW) % C
    n = offs // (HW * C)
    g = n * G + c // (C // G)
    mean = tl.load(mean_ptr + g, mask=mask, other=0.0)
    rstd = tl.load(rstd_ptr + g, mask=mask, other=1.0)
    w = tl.load(w_ptr + c, mask=mask, other=1.0)
    b = tl.load(b_ptr + c, mask=mask, other=0.0)
    tl.store(y_ptr + offs, (v - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super(ModelNew, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C = x.shape[0], x.shape[1]
        HW = x.numel() // (B * C)
        G = self.gn.num_groups
        mean = torch.empty(B * G, device=x.device, dtype=torch.float32)
        rstd = torch.empty(B * G, device=x.device, dtype=torch.float32)
        _gn_stats_kernel[(B * G,)](x, mean, rstd, (C // G) * HW, self.gn.eps, BLOCK=131072)
        y = torch.empty_like(x)
        numel = x.numel()
        BLOCK = 262144
        _gn_apply_kernel[(triton.cdiv(numel, BLOCK),)](x, y, mean, rstd, self.gn.weight, self.gn.bias,
                                                       C, HW, G, numel, BLOCK=BLOCK)
        return y
