import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _partial_lse_kernel(x_ptr, pm_ptr, ps_ptr, n_cols, chunk, SPLIT, BLOCK: tl.constexpr):
    # grid: (rows, SPLIT). Program (r, k) computes max and sum(exp(x - max)) of
    # columns [k*chunk, (k+1)*chunk) of row r.
    row = tl.program_id(0)
    k = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    lo = k * chunk
    m_vec = tl.full((BLOCK,), float("-inf"), tl.float32)
    for start in range(0, chunk, BLOCK):
        idx = lo + start + offs
        msk = (idx < n_cols) & (start + offs < chunk)
        m_vec = tl.maximum(m_vec, tl.load(x_ptr + row * n_cols + idx, mask=msk, other=float("-inf")))
    m = tl.max(m_vec, axis=0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, chunk, BLOCK):
        idx = lo + start + offs
        msk = (idx < n_cols) & (start + offs < chunk)
        v = tl.load(x_ptr + row * n_cols + idx, mask=msk, other=float("-inf"))
        acc += tl.exp(v - m)
    tl.store(pm_ptr + row * SPLIT + k, m)
    tl.store(ps_ptr + row * SPLIT + k, tl.sum(acc, axis=0))


@triton.jit
def _sub_kernel(x_ptr, lse_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    pid = tl.program_id(1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    msk = offs < n_cols
    lse = tl.load(lse_ptr + row)
    v = tl.load(x_ptr + row * n_cols + offs, mask=msk, other=0.0)
    tl.store(y_ptr + row * n_cols + offs, v - lse, mask=msk)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, n_cols = x.shape
        # split long rows across programs when the batch is too small to fill the GPU
        SPLIT = max(1, 16 // rows)
        chunk = triton.cdiv(n_cols, SPLIT)
        pm = torch.empty(rows, SPLIT, device=x.device, dtype=torch.float32)
        ps = torch.empty(rows, SPLIT, device=x.device, dtype=torch.float32)
        _partial_lse_kernel[(rows, SPLIT)](x, pm, ps, n_cols, chunk, SPLIT, BLOCK=8192)
        M = pm.amax(dim=1, keepdim=True)
        lse = (M + torch.log((ps * torch.exp(pm - M)).sum(dim=1, keepdim=True))).squeeze(1)
        y = torch.empty_like(x)
        BLOCK = 65536
        _sub_kernel[(rows, triton.cdiv(n_cols, BLOCK))](x, lse.contiguous(), y, n_cols, BLOCK=BLOCK)
        return y
