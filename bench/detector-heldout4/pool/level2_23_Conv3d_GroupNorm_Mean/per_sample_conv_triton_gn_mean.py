import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _group_stats_kernel(y_ptr, mean_ptr, rstd_ptr, GROUP_NUMEL, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)                      # (sample, group)
    base = y_ptr + pid * GROUP_NUMEL
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, GROUP_NUMEL, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < GROUP_NUMEL, other=0.0)
    mean = tl.sum(acc, axis=0) / GROUP_NUMEL
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, GROUP_NUMEL, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < GROUP_NUMEL
        d = tl.where(m, tl.load(base + offs, mask=m, other=0.0) - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / GROUP_NUMEL
    tl.store(mean_ptr + pid, mean)
    tl.store(rstd_ptr + pid, 1.0 / tl.sqrt(var + eps))


class ModelNew(nn.Module):
    """Conv3d one sample at a time, Triton group statistics with a fixed block, and
    the final mean computed in closed form from per-channel means:
    mean(GN(x)) = mean_c[gamma_c * (mean_c - mu_g) * rstd_g + beta_c]."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])]).contiguous()
        B, C = y.shape[:2]
        G = self.group_norm.num_groups
        spatial = y[0, 0].numel()
        mean = torch.empty(B * G, device=y.device, dtype=torch.float32)
        rstd = torch.empty_like(mean)
        _group_stats_kernel[(B * G,)](y, mean, rstd, (C // G) * spatial, self.group_norm.eps, BLOCK=8192)
        ch_mean = y.view(B, C, -1).mean(dim=2)
        mu = mean.view(B, G, 1).expand(B, G, C // G).reshape(B, C)
        rs = rstd.view(B, G, 1).expand(B, G, C // G).reshape(B, C)
        out = self.group_norm.weight * (ch_mean - mu) * rs + self.group_norm.bias
        return out.mean(dim=1)
