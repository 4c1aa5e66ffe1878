import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _partial_sum_kernel(y_ptr, mean_ptr, out_ptr, GROUP_NUMEL, CHUNK, CENTER: tl.constexpr,
                        BLOCK: tl.constexpr):
    pid = tl.program_id(0)       # (sample, group)
    sp = tl.program_id(1)        # split of the group
    base = y_ptr + pid * GROUP_NUMEL
    start0 = sp * CHUNK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    mu = 0.0
    if CENTER:
        mu = tl.load(mean_ptr + pid)
    for off in range(0, CHUNK, BLOCK):
        offs = start0 + off + tl.arange(0, BLOCK)
        m = (offs < GROUP_NUMEL) & (off + tl.arange(0, BLOCK) < CHUNK)
        v = tl.load(base + offs, mask=m, other=0.0)
        if CENTER:
            v = tl.where(m, v - mu, 0.0)
            v = v * v
        acc += v
    tl.atomic_add(out_ptr + pid, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    """conv3d + hardswish in PyTorch; GroupNorm statistics with a split-reduction
    Triton kernel (split count chosen to fill the GPU: more splits for small
    batches, combined with atomics); spatial mean of the normalized output in
    closed form from per-channel means."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = F.hardswish(self.conv(x)).contiguous()
        B, C = y.shape[:2]
        G = self.group_norm.num_groups
        gn = (C // G) * y[0, 0].numel()
        split = max(1, 32 // (B * G))
        chunk = triton.cdiv(gn, split)
        s = torch.zeros(B * G, device=y.device, dtype=torch.float32)
        _partial_sum_kernel[(B * G, split)](y, s, s, gn, chunk, CENTER=False, BLOCK=4096)
        mean = s / gn
        ss = torch.zeros_like(s)
        _partial_sum_kernel[(B * G, split)](y, mean, ss, gn, chunk, CENTER=True, BLOCK=4096)
        rstd = torch.rsqrt(ss / gn + self.group_norm.eps)
        ch_mean = y.view(B, C, -1).mean(dim=2)
        mu = mean.view(B, G, 1).expand(B, G, C // G).reshape(B, C)
        rs = rstd.view(B, G, 1).expand(B, G, C // G).reshape(B, C)
        return self.group_norm.weight * (ch_mean - mu) * rs + self.group_norm.bias
