import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

_BLOCKS = {1: 256, 2: 512, 4: 1024, 8: 2048}


@triton.jit
def _relu_bias_kernel(y_ptr, b_ptr, out_ptr, n, HW, C, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    c = (offs // HW) % C
    b = tl.load(b_ptr + c, mask=m, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0) + b, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        # one conv per image: same conv shape for every batch size
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        out = torch.empty_like(y)
        BLOCK = _BLOCKS.get(B, 4096)
        n = y.numel()
        _relu_bias_kernel[(triton.cdiv(n, BLOCK),)](y, self.bias.reshape(-1).contiguous(), out, n, H * W, C,
                                                    BLOCK=BLOCK)
        return out
