import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sig_sum_atomic_kernel(x_ptr, w_ptr, b_ptr, out_ptr, IN, HID,
                           BLOCK_IN: tl.constexpr, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    ph = tl.program_id(1)
    k = tl.arange(0, BLOCK_IN)
    h = ph * BLOCK_H + tl.arange(0, BLOCK_H)
    km = k < IN
    hm = h < HID
    xv = tl.load(x_ptr + row * IN + k, mask=km, other=0.0)
    wv = tl.load(w_ptr + h[:, None] * IN + k[None, :], mask=hm[:, None] & km[None, :], other=0.0)
    y = tl.sum(wv * xv[None, :], axis=1) + tl.load(b_ptr + h, mask=hm, other=0.0)
    s = tl.where(hm, 1.0 / (1.0 + tl.exp(-y)), 0.0)
    tl.atomic_add(out_ptr + row, tl.sum(s, axis=0))


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        x = x.contiguous()
        B, IN = x.shape
        HID = self.linear.out_features
        # split the hidden dim across more programs when there are few rows
        BLOCK_H = 2 if B < 8 else 16
        out = torch.zeros((B, 1), device=x.device, dtype=x.dtype)
        grid = (B, triton.cdiv(HID, BLOCK_H))
        _sig_sum_atomic_kernel[grid](x, self.linear.weight.contiguous(), self.linear.bias, out, IN, HID,
                                     BLOCK_IN=triton.next_power_of_2(IN), BLOCK_H=BLOCK_H)
        return out
