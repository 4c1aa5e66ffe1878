import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scan_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros((1,), tl.float32)
    for start in range(0, N, BLOCK):
        idx = start + offs
        v = tl.load(x_ptr + row * N + idx, mask=idx < N, other=0.0)
        c = tl.cumsum(v, axis=0) + carry
        tl.store(y_ptr + row * N + idx, c, mask=idx < N)
        carry += tl.sum(v, axis=0, keep_dims=True)


_CONFIG_CACHE = {}


def _pick_block(n_rows, n_cols):
    # tiny "autotuner": a cost model evaluated once per (rows, cols) shape and cached
    key = (n_rows, n_cols)
    if key not in _CONFIG_CACHE:
        best, best_cost = None, None
        for block in (1024, 2048, 4096, 8192):
            waves = triton.cdiv(n_rows, 132)
            cost = waves * (n_cols / block) * 1.0 + block / 1024.0 * (1.0 if n_rows >= 64 else 0.25)
            if best_cost is None or cost < best_cost:
                best, best_cost = block, cost
        _CONFIG_CACHE[key] = best
    return _CONFIG_CACHE[key]


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        R, N = x.shape
        y = torch.empty_like(x)
        _scan_kernel[(R,)](x, y, N, BLOCK=_pick_block(R, N))
        return y
