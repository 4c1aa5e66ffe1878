"""Add + RMSNorm: single-block kernel, chunked kernel if the block won't fit.

The fallback is taken only when the single-block launch raises (too much
shared memory / registers for the hidden size); the batch never decides it.
"""
import torch
import triton
import triton.language as tl

_MAX_BLOCK = 1 << 16
_failed_hidden = set()


@triton.jit
def _one_block(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, stride, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    p = row * stride + cols
    s = (tl.load(x_ptr + p, mask=m, other=0.0) + tl.load(r_ptr + p, mask=m, other=0.0)).to(ro_ptr.dtype.element_ty)
    tl.store(ro_ptr + p, s, mask=m)
    f = s.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(f * f, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + p, (f * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _chunked(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, stride, H, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, H, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        m = cols < H
        p = row * stride + cols
        s = (tl.load(x_ptr + p, mask=m, other=0.0) + tl.load(r_ptr + p, mask=m, other=0.0)).to(ro_ptr.dtype.element_ty)
        tl.store(ro_ptr + p, s, mask=m)
        f = s.to(tl.float32)
        acc += f * f
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
    for start in range(0, H, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        m = cols < H
        p = row * stride + cols
        f = tl.load(ro_ptr + p, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + p, (f * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, residual, weight, eps):
    x = x.contiguous()
    residual = residual.contiguous()
    B, H = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    block = triton.next_power_of_2(H)
    args = (x, residual, weight, y, ro, x.stride(0), H, eps)
    if block <= _MAX_BLOCK and H not in _failed_hidden:
        try:
            _one_block[(B,)](*args, BLOCK=block, num_warps=8 if block >= 4096 else 4)
            return y, ro
        except Exception:  # resource limits depend on the hidden size only
            _failed_hidden.add(H)
    _chunked[(B,)](*args, CHUNK=4096, num_warps=8)
    return y, ro
