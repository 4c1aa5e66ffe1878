"""Fused add + RMSNorm with a split policy table."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_partial(x_ptr, r_ptr, ro_ptr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    lo = split * chunk
    for start in range(lo, lo + chunk, BLOCK_H):
        mask = (start + offs < hidden) & (start + offs < lo + chunk)
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        s = (x + r).to(ro_ptr.dtype.element_ty)
        tl.store(ro_ptr + row * hidden + start + offs, s, mask=mask)
        acc += s.to(tl.float32) * s.to(tl.float32)
    tl.store(part_ptr + row * num_splits + split, tl.sum(acc, axis=0))


@triton.jit
def _normalize(
    ro_ptr, w_ptr, part_ptr, y_ptr, hidden, eps, num_splits, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr
):
    row = tl.program_id(0)
    s_offs = tl.arange(0, BLOCK_S)
    parts = tl.load(part_ptr + row * num_splits + s_offs, mask=s_offs < num_splits, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(parts, axis=0) / hidden + eps)
    offs = tl.arange(0, BLOCK_H)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        s = tl.load(ro_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _split_add_rmsnorm(x, residual, weight, eps, num_splits):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    chunk = triton.cdiv(hidden, num_splits)
    partials = torch.empty((batch, num_splits), dtype=torch.float32, device=x.device)
    _add_partial[(batch, num_splits)](
        x, residual, residual_out, partials, hidden, chunk, num_splits, BLOCK_H=128
    )
    _normalize[(batch,)](
        residual_out,
        weight,
        partials,
        y,
        hidden,
        eps,
        num_splits,
        BLOCK_H=min(triton.next_power_of_2(hidden), 1024),
        BLOCK_S=triton.next_power_of_2(num_splits),
    )
    return y, residual_out


_POLICY = [(lambda rows: rows <= 2, 4), (lambda rows: rows <= 5, 2), (lambda rows: True, 1)]


def kernel(x, residual, weight, eps):
    splits = next(s for ok, s in _POLICY if ok(x.shape[0]))
    return _split_add_rmsnorm(x, residual, weight, eps, splits)
