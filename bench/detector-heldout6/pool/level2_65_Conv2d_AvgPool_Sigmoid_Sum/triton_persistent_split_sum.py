import torch
import torch.nn as nn
import triton
import triton.language as tl

NUM_SMS = 16


@triton.jit
def _partial_sum_kernel(s_ptr, part_ptr, N, CHUNK, SPLIT, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    sp = tl.program_id(1)
    acc = tl.zeros((BLOCK,), tl.float32)
    lo = sp * CHUNK
    for k in range(0, CHUNK, BLOCK):
        offs = lo + k + tl.arange(0, BLOCK)
        m = (offs < N) & (offs < lo + CHUNK)
        acc += tl.load(s_ptr + b * N + offs, mask=m, other=0.0)
    tl.store(part_ptr + b * SPLIT + sp, tl.sum(acc, axis=0))


@triton.jit
def _finish_kernel(part_ptr, out_ptr, SPLIT: tl.constexpr):
    b = tl.program_id(0)
    acc = 0.0
    for i in tl.static_range(SPLIT):
        acc += tl.load(part_ptr + b * SPLIT + i)
    tl.store(out_ptr + b, acc)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.avg_pool = nn.AvgPool2d(pool_kernel_size)

    def forward(self, x):
        y = torch.cat([self.conv(x[i:i + 1]) for i in range(x.shape[0])], 0)
        s = torch.sigmoid(self.avg_pool(y)).contiguous()
        B = s.shape[0]
        N = s[0].numel()
        # persistent-style: spread each sample over the SMs that the batch leaves idle
        split = max(1, NUM_SMS // B)
        BLOCK = 256
        chunk = triton.cdiv(triton.cdiv(N, split), BLOCK) * BLOCK
        part = torch.empty((B, split), device=s.device, dtype=torch.float32)
        _partial_sum_kernel[(B, split)](s, part, N, chunk, split, BLOCK=BLOCK)
        out = torch.empty((B,), device=s.device, dtype=s.dtype)
        _finish_kernel[(B,)](part, out, SPLIT=split)
        return out
