import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gap_atomic_kernel(y_ptr, acc_ptr, HW, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    pb = tl.program_id(1)
    offs = pb * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + plane * HW + offs, mask=offs < HW, other=0.0)
    tl.atomic_add(acc_ptr + plane, tl.sum(v, axis=0))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.cat([self.conv_transpose(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        HW = H * W
        # small batches: more, smaller blocks per plane so enough programs run
        BLOCK = 128 if B < 8 else 512
        acc = torch.zeros((B * C,), device=y.device, dtype=torch.float32)
        _gap_atomic_kernel[(B * C, triton.cdiv(HW, BLOCK))](y, acc, HW, BLOCK=BLOCK)
        g = acc.view(B, C) / HW + self.bias.view(1, C)
        return torch.logsumexp(g, dim=1, keepdim=True) * 10.0
