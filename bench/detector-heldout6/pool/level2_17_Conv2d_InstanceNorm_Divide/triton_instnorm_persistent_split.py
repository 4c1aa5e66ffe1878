import torch
import torch.nn as nn
import triton
import triton.language as tl

TARGET_PROGRAMS = 128  # keep the machine busy: split each (n, c) plane when there are few planes


@triton.jit
def _partial_stats_kernel(y_ptr, part_ptr, HW, CHUNK, SPLIT, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    sp = tl.program_id(1)
    s = tl.zeros((BLOCK,), tl.float32)
    q = tl.zeros((BLOCK,), tl.float32)
    lo = sp * CHUNK
    for k in range(0, CHUNK, BLOCK):
        offs = lo + k + tl.arange(0, BLOCK)
        m = (offs < HW) & (offs < lo + CHUNK)
        v = tl.load(y_ptr + plane * HW + offs, mask=m, other=0.0)
        s += v
        q += v * v
    tl.store(part_ptr + (plane * SPLIT + sp) * 2, tl.sum(s, axis=0))
    tl.store(part_ptr + (plane * SPLIT + sp) * 2 + 1, tl.sum(q, axis=0))


@triton.jit
def _normalize_kernel(y_ptr, part_ptr, out_ptr, HW, SPLIT: tl.constexpr, eps, inv_div, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    pb = tl.program_id(1)
    s = 0.0
    q = 0.0
    for i in tl.static_range(SPLIT):
        s += tl.load(part_ptr + (plane * SPLIT + i) * 2)
        q += tl.load(part_ptr + (plane * SPLIT + i) * 2 + 1)
    mean = s / HW
    var = q / HW - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    offs = pb * BLOCK + tl.arange(0, BLOCK)
    m = offs < HW
    v = tl.load(y_ptr + plane * HW + offs, mask=m, other=0.0)
    tl.store(out_ptr + plane * HW + offs, (v - mean) * rstd * inv_div, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0).contiguous()
        B, C, H, W = y.shape
        HW = H * W
        planes = B * C
        split = max(1, min(8, TARGET_PROGRAMS // planes))
        BLOCK = 128
        chunk = triton.cdiv(triton.cdiv(HW, split), BLOCK) * BLOCK
        part = torch.empty((planes, split, 2), device=y.device, dtype=torch.float32)
        _partial_stats_kernel[(planes, split)](y, part, HW, chunk, split, BLOCK=BLOCK)
        out = torch.empty_like(y)
        _normalize_kernel[(planes, triton.cdiv(HW, 1024))](y, part, out, HW, SPLIT=split, eps=1e-5,
                                                           inv_div=1.0 / self.divide_by, BLOCK=1024)
        return out
