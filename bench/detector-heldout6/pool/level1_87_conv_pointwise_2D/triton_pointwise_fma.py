import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _pw_kernel(x_ptr, w_ptr, out_ptr, HW, CIN: tl.constexpr, COUT, BLOCK_O: tl.constexpr, BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    pp = tl.program_id(1)
    po = tl.program_id(2)
    p = pp * BLOCK_P + tl.arange(0, BLOCK_P)
    oc = po * BLOCK_O + tl.arange(0, BLOCK_O)
    pm = p < HW
    om = oc < COUT
    acc = tl.zeros((BLOCK_O, BLOCK_P), tl.float32)
    for ci in tl.static_range(CIN):
        xv = tl.load(x_ptr + (b * CIN + ci) * HW + p, mask=pm, other=0.0)
        wv = tl.load(w_ptr + oc * CIN + ci, mask=om, other=0.0)
        acc += wv[:, None] * xv[None, :]
    tl.store(out_ptr + (b * COUT + oc[:, None]) * HW + p[None, :], acc, mask=om[:, None] & pm[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, bias: bool = False):
        super(ModelNew, self).__init__()
        self.conv1d = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        COUT = self.conv1d.out_channels
        w = self.conv1d.weight.reshape(COUT, C).contiguous()
        out = torch.empty((B, COUT, H, W), device=x.device, dtype=x.dtype)
        HW = H * W
        BLOCK_P = 4096 if B < 4 else 8192  # fewer, fatter programs for large batches
        grid = (B, triton.cdiv(HW, BLOCK_P), triton.cdiv(COUT, 64))
        _pw_kernel[grid](x, w, out, HW, CIN=C, COUT=COUT, BLOCK_O=64, BLOCK_P=BLOCK_P)
        return out
