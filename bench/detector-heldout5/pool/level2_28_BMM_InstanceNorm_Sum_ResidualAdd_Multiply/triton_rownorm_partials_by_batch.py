import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

TILE_M = 16


@triton.jit
def partial_sums_kernel(h_ptr, mean_ptr, part_ptr, N, CHUNK: tl.constexpr, P: tl.constexpr,
                        CENTERED: tl.constexpr):
    row = tl.program_id(0)
    p = tl.program_id(1)
    offs = p * CHUNK + tl.arange(0, CHUNK)
    h = tl.load(h_ptr + row * N + offs)
    if CENTERED:
        mu = tl.load(mean_ptr + row)
        d = h - mu
        s = tl.sum(d * d, axis=0)
    else:
        s = tl.sum(h, axis=0)
    tl.store(part_ptr + row * P + p, s)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super(ModelNew, self).__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        B, K = x.shape
        N = self.bmm.out_features
        h = x.new_empty(B, N)
        for s in range(0, B, TILE_M):
            n = min(TILE_M, B - s)
            buf = x.new_zeros(TILE_M, K)
            buf[:n] = x[s:s + n]
            h[s:s + n] = F.linear(buf, self.bmm.weight, self.bmm.bias)[:n]
        # enough programs to fill the machine: more partials per row for small batches
        P = 16 if B < 8 else 4
        CHUNK = N // P
        part = torch.empty(B, P, dtype=h.dtype)
        partial_sums_kernel[(B, P)](h, h, part, N, CHUNK=CHUNK, P=P, CENTERED=False)
        mean = part.sum(dim=1) / N
        partial_sums_kernel[(B, P)](h, mean, part, N, CHUNK=CHUNK, P=P, CENTERED=True)
        var = part.sum(dim=1) / N
        hn = (h - mean[:, None]) * torch.rsqrt(var[:, None] + self.instance_norm.eps)
        return (hn + y) * y
