import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bn_relu_kernel(x_ptr, scale_ptr, shift_ptr, out_ptr, n, HW, C, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    c = (offs // HW) % C
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    s = tl.load(scale_ptr + c, mask=m, other=0.0)
    t = tl.load(shift_ptr + c, mask=m, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(v * s + t, 0.0), mask=m)

class ModelNew(nn.Module):
    def __init__(self, num_input_features: int, num_output_features: int):
        """
        :param num_input_features: The number of input feature maps
        :param num_output_features: The number of output feature maps
        """
        super(ModelNew, self).__init__()
        self.transition = nn.Sequential(
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2)
        )

    def forward(self, x):
        bn, conv, pool = self.transition[0], self.transition[2], self.transition[3]
        x = x.contiguous()
        B, C, H, W = x.shape
        var, mean = torch.var_mean(x, dim=(0, 2, 3), unbiased=False)
        scale = (bn.weight * torch.rsqrt(var + bn.eps)).contiguous()
        shift = (bn.bias - mean * scale).contiguous()
        h = torch.empty_like(x)
        n = x.numel()
        _bn_relu_kernel[(triton.cdiv(n, 8192),)](x, scale, shift, h, n, H * W, C, BLOCK=8192)
        return pool(conv(h))
