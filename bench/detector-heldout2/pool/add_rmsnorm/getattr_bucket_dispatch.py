"""Fused add + RMSNorm with a launcher per token bucket.

The launcher is looked up by name from the bucket of the token count; the
"tiny" launcher halves the row between two partial sums (two loads in flight
per row) and folds the weight into the scale.
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _addnorm_common import bucket_for, row_block  # noqa: E402


@triton.jit
def _add_rms_halves(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, stride, H, eps, HALF: tl.constexpr):
    row = tl.program_id(0)
    c0 = tl.arange(0, HALF)
    c1 = HALF + c0
    m0 = c0 < H
    m1 = c1 < H
    p0 = row * stride + c0
    p1 = row * stride + c1
    s0 = (tl.load(x_ptr + p0, mask=m0, other=0.0) + tl.load(r_ptr + p0, mask=m0, other=0.0)).to(ro_ptr.dtype.element_ty)
    s1 = (tl.load(x_ptr + p1, mask=m1, other=0.0) + tl.load(r_ptr + p1, mask=m1, other=0.0)).to(ro_ptr.dtype.element_ty)
    tl.store(ro_ptr + p0, s0, mask=m0)
    tl.store(ro_ptr + p1, s1, mask=m1)
    f0 = s0.to(tl.float32)
    f1 = s1.to(tl.float32)
    ss = tl.sum(f0 * f0, axis=0) + tl.sum(f1 * f1, axis=0)
    rstd = tl.rsqrt(ss / H + eps)
    w0 = tl.load(w_ptr + c0, mask=m0, other=0.0).to(tl.float32) * rstd
    w1 = tl.load(w_ptr + c1, mask=m1, other=0.0).to(tl.float32) * rstd
    tl.store(y_ptr + p0, (f0 * w0).to(y_ptr.dtype.element_ty), mask=m0)
    tl.store(y_ptr + p1, (f1 * w1).to(y_ptr.dtype.element_ty), mask=m1)


@triton.jit
def _add_rms_full(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, stride, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    p = row * stride + cols
    s = (tl.load(x_ptr + p, mask=m, other=0.0) + tl.load(r_ptr + p, mask=m, other=0.0)).to(ro_ptr.dtype.element_ty)
    tl.store(ro_ptr + p, s, mask=m)
    f = s.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(f * f, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + p, (f * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


class _Launchers:
    """One launcher per token bucket; looked up by name."""

    def _launch_tiny(self, x, r, w, y, ro, eps):
        B, H = x.shape
        _add_rms_halves[(B,)](x, r, w, y, ro, x.stride(0), H, eps, HALF=row_block(H) // 2)

    def _launch_medium(self, x, r, w, y, ro, eps):
        B, H = x.shape
        _add_rms_full[(B,)](x, r, w, y, ro, x.stride(0), H, eps, BLOCK=row_block(H), num_warps=4)

    def _launch_large(self, x, r, w, y, ro, eps):
        B, H = x.shape
        _add_rms_full[(B,)](x, r, w, y, ro, x.stride(0), H, eps, BLOCK=row_block(H), num_warps=8)


_LAUNCHERS = _Launchers()


def kernel(x, residual, weight, eps):
    x = x.contiguous()
    residual = residual.contiguous()
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    launch = getattr(_LAUNCHERS, "_launch_" + bucket_for(x.shape[0]))
    launch(x, residual, weight, y, ro, eps)
    return y, ro
