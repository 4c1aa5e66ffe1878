"""RMSNorm: large batches pack several rows per program, small ones use one.

Both variants call the same per-row routine with the same block, so a row's
arithmetic does not depend on how rows are grouped into programs.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _norm_one_row(x_ptr, w_ptr, y_ptr, row, stride, H, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    m = cols < H
    x = tl.load(x_ptr + row * stride + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rms_grouped(x_ptr, w_ptr, y_ptr, n_rows, stride, H, eps,
                 BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    for r in tl.static_range(ROWS):
        row = pid * ROWS + r
        if row < n_rows:
            _norm_one_row(x_ptr, w_ptr, y_ptr, row, stride, H, eps, BLOCK)


def _rows_per_program(n_rows):
    # fewer, fatter programs once the grid is much larger than the machine
    if n_rows >= 256:
        return 4
    if n_rows >= 16:
        return 2
    return 1


def kernel(x, weight, eps):
    x = x.contiguous()
    B, H = x.shape
    y = torch.empty_like(x)
    rows = _rows_per_program(B)
    block = triton.next_power_of_2(H)
    _rms_grouped[(triton.cdiv(B, rows),)](x, weight, y, B, x.stride(0), H, eps,
                                          BLOCK=block, ROWS=rows, num_warps=4)
    return y
