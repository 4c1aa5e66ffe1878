import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_kernel(x_ptr, y_ptr, C, HW, eps, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # grid: (batch, spatial tiles). Each program owns BLOCK_S spatial positions
    # of one sample and reduces over all C channels.
    b = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_c = tl.arange(0, BLOCK_C)
    mask = (offs_c[:, None] < C) & (offs_s[None, :] < HW)
    ptrs = b * C * HW + offs_c[:, None] * HW + offs_s[None, :]
    x = tl.load(x_ptr + ptrs, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / C
    inv = 1.0 / tl.sqrt(ms + eps)
    tl.store(y_ptr + ptrs, x * inv[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C = x.shape[0], x.shape[1]
        HW = x.numel() // (B * C)
        y = torch.empty_like(x)
        BLOCK_S = 4096
        grid = (B, triton.cdiv(HW, BLOCK_S))
        _rms_kernel[grid](x, y, C, HW, self.eps, BLOCK_C=triton.next_power_of_2(C), BLOCK_S=BLOCK_S)
        return y
