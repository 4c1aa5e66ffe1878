import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _inorm_kernel(x_ptr, y_ptr, HW, eps, BLOCK: tl.constexpr):
    # one program per (sample, channel) plane
    pid = tl.program_id(0)
    base = pid * HW
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, HW, BLOCK):
        idx = start + offs
        acc += tl.load(x_ptr + base + idx, mask=idx < HW, other=0.0)
    mean = tl.sum(acc, axis=0) / HW
    acc2 = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, HW, BLOCK):
        idx = start + offs
        v = tl.load(x_ptr + base + idx, mask=idx < HW, other=0.0)
        d = tl.where(idx < HW, v - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / HW + eps)
    for start in range(0, HW, BLOCK):
        idx = start + offs
        v = tl.load(x_ptr + base + idx, mask=idx < HW, other=0.0)
        tl.store(y_ptr + base + idx, (v - mean) * rstd, mask=idx < HW)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super(ModelNew, self).__init__()
        # default InstanceNorm2d: no affine, no running stats
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        y = torch.empty_like(x)
        _inorm_kernel[(B * C,)](x, y, H * W, self.inorm.eps, BLOCK=65536)
        return y
