import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sigmoid_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cb = tl.program_id(1)
    cols = cb * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    y = tl.sigmoid(x)
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B = x.shape[0]
        x2 = x.view(B, -1)
        y = torch.empty_like(x2)
        n_cols = x2.shape[1]
        # few rows -> small column tiles so there are enough programs; many rows -> big tiles
        BLOCK_N = 8192 if B < 8 else 65536
        grid = (B, triton.cdiv(n_cols, BLOCK_N))
        _sigmoid_rows_kernel[grid](x2, y, n_cols, BLOCK_N=BLOCK_N)
        return y.view_as(x)
