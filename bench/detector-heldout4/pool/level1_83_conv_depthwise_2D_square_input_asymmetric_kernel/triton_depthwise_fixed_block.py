import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _dw_conv_k1_kernel(x_ptr, w_ptr, y_ptr, C, H, W, Ho, K: tl.constexpr, DIL: tl.constexpr,
                       BLOCK: tl.constexpr):
    nc = tl.program_id(0)          # (sample, channel) plane
    pb = tl.program_id(1)          # block of output pixels inside the plane
    c = nc % C
    offs = pb * BLOCK + tl.arange(0, BLOCK)
    n_out = Ho * W
    mask = offs < n_out
    oh = offs // W
    ow = offs % W
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in tl.static_range(K):
        wv = tl.load(w_ptr + c * K + j)
        xv = tl.load(x_ptr + nc * H * W + (oh + j * DIL) * W + ow, mask=mask, other=0.0)
        acc += xv * wv
    tl.store(y_ptr + nc * n_out + offs, acc, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, bias: bool = False):
        super(ModelNew, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size=(kernel_size, 1), stride=stride,
                                padding=padding, dilation=dilation, groups=in_channels, bias=bias)
        self.k = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1 or self.padding != 0:
            return self.conv2d(x)
        x = x.contiguous()
        N, C, H, W = x.shape
        Ho = H - self.dilation * (self.k - 1)
        y = torch.empty((N, C, Ho, W), device=x.device, dtype=x.dtype)
        w = self.conv2d.weight.reshape(C, self.k).contiguous()
        BLOCK = 65536
        grid = (N * C, triton.cdiv(Ho * W, BLOCK))
        _dw_conv_k1_kernel[grid](x, w, y, C, H, W, Ho, K=self.k, DIL=self.dilation, BLOCK=BLOCK)
        if self.conv2d.bias is not None:
            y = y + self.conv2d.bias.view(1, -1, 1, 1)
        return y
