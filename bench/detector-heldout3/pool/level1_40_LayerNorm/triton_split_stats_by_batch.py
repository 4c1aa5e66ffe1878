import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partial_stats_kernel(x_ptr, psum_ptr, psq_ptr, N, chunk, SPLIT, BLOCK: tl.constexpr):
    # grid: (rows, SPLIT); program (r, s) reduces elements [s*chunk, (s+1)*chunk) of row r
    row = tl.program_id(0)
    sid = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    start0 = sid * chunk
    s = tl.zeros((BLOCK,), tl.float32)
    sq = tl.zeros((BLOCK,), tl.float32)
    for k in range(0, chunk, BLOCK):
        idx = start0 + k + offs
        m = (idx < N) & (k + offs < chunk)
        v = tl.load(x_ptr + row * N + idx, mask=m, other=0.0)
        s += v
        sq += v * v
    tl.store(psum_ptr + row * SPLIT + sid, tl.sum(s, axis=0))
    tl.store(psq_ptr + row * SPLIT + sid, tl.sum(sq, axis=0))


@triton.jit
def _apply_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    pid = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    v = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
    w = tl.load(w_ptr + offs, mask=m, other=1.0)
    b = tl.load(b_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + row * N + offs, (v - mean) * rstd * w + b, mask=m)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows = x.shape[0]
        N = x.numel() // rows
        # enough programs to cover ~64 SMs even for tiny batches
        SPLIT = max(1, min(64, 64 // rows))
        chunk = triton.cdiv(N, SPLIT)
        BLOCK = 65536
        psum = torch.empty(rows, SPLIT, device=x.device, dtype=torch.float32)
        psq = torch.empty(rows, SPLIT, device=x.device, dtype=torch.float32)
        _partial_stats_kernel[(rows, SPLIT)](x, psum, psq, N, chunk, SPLIT, BLOCK=BLOCK)
        mean = psum.sum(dim=1) / N
        var = psq.sum(dim=1) / N - mean * mean
        rstd = torch.rsqrt(var + self.ln.eps)
        y = torch.empty_like(x)
        _apply_kernel[(rows, triton.cdiv(N, 262144))](x, y, self.ln.weight, self.ln.bias, mean, rstd, N,
                                                        BLOCK=262144)
        return y
