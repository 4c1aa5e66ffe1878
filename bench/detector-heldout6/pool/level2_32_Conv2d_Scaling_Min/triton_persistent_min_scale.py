import torch
import torch.nn as nn
import triton
import triton.language as tl

NUM_PROGRAMS = 8  # persistent grid sized to the machine, not to the problem


@triton.jit
def _persistent_min_scale(y_ptr, out_ptr, n_tiles, HW, C, scale, TILES_PER_SAMPLE, NPROG: tl.constexpr,
                          BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for t in range(pid, n_tiles, NPROG):
        b = t // TILES_PER_SAMPLE
        offs = (t % TILES_PER_SAMPLE) * BLOCK + tl.arange(0, BLOCK)
        m = offs < HW
        acc = tl.full((BLOCK,), float("inf"), tl.float32)
        for c in range(0, C):
            acc = tl.minimum(acc, tl.load(y_ptr + (b * C + c) * HW + offs, mask=m, other=float("inf")) * scale)
        tl.store(out_ptr + b * HW + offs, acc, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        HW = H * W
        BLOCK = 256
        tps = triton.cdiv(HW, BLOCK)
        n_tiles = B * tps
        nprog = min(NUM_PROGRAMS, n_tiles)
        out = torch.empty((B, 1, H, W), device=y.device, dtype=y.dtype)
        _persistent_min_scale[(nprog,)](y, out, n_tiles, HW, C, self.scale_factor, tps, NPROG=nprog, BLOCK=BLOCK)
        return out
