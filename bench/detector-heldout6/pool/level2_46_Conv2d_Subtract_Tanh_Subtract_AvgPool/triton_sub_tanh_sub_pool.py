import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh(v):
    e = tl.exp(-2.0 * tl.abs(v))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(v >= 0, t, -t)


@triton.jit
def _epi_pool_kernel(y_ptr, out_ptr, total, H, W, OH, OW, s1, s2, KP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    ow = offs % OW
    oh = (offs // OW) % OH
    plane = offs // (OW * OH)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(KP):
        for j in tl.static_range(KP):
            v = tl.load(y_ptr + plane * H * W + (oh * KP + i) * W + ow * KP + j, mask=m, other=0.0)
            acc += _tanh(v - s1) - s2
    tl.store(out_ptr + offs, acc / (KP * KP), mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract1_value, subtract2_value, kernel_size_pool):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract1_value = subtract1_value
        self.subtract2_value = subtract2_value
        self.avgpool = nn.AvgPool2d(kernel_size_pool)
        self.kp = kernel_size_pool

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        OH, OW = H // self.kp, W // self.kp
        out = torch.empty((B, C, OH, OW), device=y.device, dtype=y.dtype)
        total = out.numel()
        _epi_pool_kernel[(triton.cdiv(total, 1024),)](y, out, total, H, W, OH, OW, self.subtract1_value,
                                                       self.subtract2_value, KP=self.kp, BLOCK=1024)
        return out
