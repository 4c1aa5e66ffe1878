"""RMSNorm with a looped reduction; the chunk width comes from a tuning table."""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rmsnorm_tuning import pick_config  # noqa: E402


@triton.jit
def _rmsnorm_looped(x_ptr, w_ptr, y_ptr, stride, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, H, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < H, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
    for off in range(0, H, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < H
        x = tl.load(base + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


class FusedRMSNorm:
    def __init__(self):
        self.last_cfg = None

    def __call__(self, x, weight, eps):
        x = x.contiguous()
        B, H = x.shape
        cfg = pick_config(B, H)
        self.last_cfg = cfg
        y = torch.empty_like(x)
        _rmsnorm_looped[(B,)](x, weight, y, x.stride(0), H, eps,
                              BLOCK=cfg.block, num_warps=cfg.num_warps)
        return y


_op = FusedRMSNorm()


def kernel(x, weight, eps):
    return _op(x, weight, eps)
