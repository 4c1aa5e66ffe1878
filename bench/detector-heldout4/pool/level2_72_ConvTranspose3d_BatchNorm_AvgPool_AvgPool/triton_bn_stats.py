import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bn_channel_stats_kernel(y_ptr, sum_ptr, sumsq_ptr, N, C, S, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for n in range(0, N):
        base = y_ptr + (n * C + c) * S
        for start in range(0, S, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            v = tl.load(base + offs, mask=offs < S, other=0.0)
            acc += v
            acc2 += v * v
    tl.store(sum_ptr + c, tl.sum(acc, axis=0))
    tl.store(sumsq_ptr + c, tl.sum(acc2, axis=0))


class ModelNew(nn.Module):
    """conv_transpose3d; Triton per-channel sums over (N, D, H, W) for the
    training-mode BatchNorm statistics (running stats updated with the unbiased
    variance); affine apply; one 4x average pool."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        N, C = y.shape[:2]
        S = y[0, 0].numel()
        s = torch.empty(C, device=y.device, dtype=torch.float32)
        s2 = torch.empty_like(s)
        _bn_channel_stats_kernel[(C,)](y, s, s2, N, C, S, BLOCK=65536)
        cnt = N * S
        mean = s / cnt
        var = (s2 / cnt - mean * mean).clamp_min(0)
        bn = self.batch_norm
        if self.training:
            with torch.no_grad():
                bn.running_mean.mul_(1 - bn.momentum).add_(bn.momentum * mean)
                bn.running_var.mul_(1 - bn.momentum).add_(bn.momentum * var * cnt / (cnt - 1))
                bn.num_batches_tracked.add_(1)
        else:
            mean, var = bn.running_mean, bn.running_var
        scale = bn.weight * torch.rsqrt(var + bn.eps)
        shift = bn.bias - mean * scale
        y = y * scale.view(1, C, 1, 1, 1) + shift.view(1, C, 1, 1, 1)
        return F.avg_pool3d(y, 4)
