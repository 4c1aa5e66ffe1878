"""Autotuned RMSNorm; small batches only consider the narrow tile."""

import torch
import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    narrow = named_args["n_rows"] < 8
    return [c for c in configs if (c.kwargs["BLOCK_H"] < 1024) == narrow][:1]


@triton.autotune(
    configs=[triton.Config({"BLOCK_H": 256}, num_warps=2), triton.Config({"BLOCK_H": 1024}, num_warps=4)],
    key=["n_rows", "hidden"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    _rmsnorm_row[(batch,)](x, weight, y, batch, hidden, eps)
    return y
