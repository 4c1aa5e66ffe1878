import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _stats_partial_kernel(y_ptr, mean_ptr, out_ptr, GROUP_NUMEL, CHUNK, CENTER: tl.constexpr,
                          BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    sp = tl.program_id(1)
    base = y_ptr + pid * GROUP_NUMEL
    mu = 0.0
    if CENTER:
        mu = tl.load(mean_ptr + pid)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, CHUNK, BLOCK):
        local = off + tl.arange(0, BLOCK)
        offs = sp * CHUNK + local
        m = (offs < GROUP_NUMEL) & (local < CHUNK)
        v = tl.load(base + offs, mask=m, other=0.0)
        if CENTER:
            v = tl.where(m, v - mu, 0.0)
            v = v * v
        acc += v
    tl.atomic_add(out_ptr + pid, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    """conv2d, (x + b) * s, sigmoid in PyTorch; GroupNorm statistics with a
    split-reduction Triton kernel whose split count is sized to fill the GPU
    (more splits per group when B * G is small), partials combined with atomics."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups, bias_shape, scale_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        y = torch.sigmoid((self.conv(x) + self.bias) * self.scale).contiguous()
        B, C, H, W = y.shape
        G = self.group_norm.num_groups
        gn = (C // G) * H * W
        split = max(1, 64 // (B * G))
        chunk = triton.cdiv(gn, split)
        s = torch.zeros(B * G, device=y.device, dtype=torch.float32)
        _stats_partial_kernel[(B * G, split)](y, s, s, gn, chunk, CENTER=False, BLOCK=65536)
        mean = s / gn
        ss = torch.zeros_like(s)
        _stats_partial_kernel[(B * G, split)](y, mean, ss, gn, chunk, CENTER=True, BLOCK=65536)
        rstd = torch.rsqrt(ss / gn + self.group_norm.eps)
        yg = y.view(B, G, -1)
        out = ((yg - mean.view(B, G, 1)) * rstd.view(B, G, 1)).view_as(y)
        return out * self.group_norm.weight.view(1, C, 1, 1) + self.group_norm.bias.view(1, C, 1, 1)
