"""Fused add + RMSNorm as a persistent kernel.

At most NUM_PROGRAMS programs are launched; each walks the rows pid,
pid + nprog, ...  The row arithmetic is the same whatever row a program gets.
"""
import torch
import triton
import triton.language as tl

NUM_PROGRAMS = 16


@triton.jit
def _add_rms_persistent(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, n_rows, stride, H, eps,
                        BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    m = cols < H
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    for row in range(pid, n_rows, nprog):
        off = row * stride + cols
        s = (tl.load(x_ptr + off, mask=m, other=0.0) + tl.load(r_ptr + off, mask=m, other=0.0))
        s = s.to(ro_ptr.dtype.element_ty)
        tl.store(ro_ptr + off, s, mask=m)
        sf = s.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(sf * sf, axis=0) / H + eps)
        tl.store(y_ptr + off, (sf * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, residual, weight, eps):
    x = x.contiguous()
    residual = residual.contiguous()
    B, H = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    grid = (max(1, min(B, NUM_PROGRAMS)),)
    _add_rms_persistent[grid](x, residual, weight, y, ro, B, x.stride(0), H, eps,
                              BLOCK=triton.next_power_of_2(H))
    return y, ro
