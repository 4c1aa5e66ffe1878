import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_act_kernel(x_ptr, w_ptr, b_ptr, out_ptr, N, K, RELU: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    nm = rn < N
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        km = rk < K
        xv = tl.load(x_ptr + row * K + rk, mask=km, other=0.0)
        wv = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=nm[:, None] & km[None, :], other=0.0)
        acc += tl.sum(wv * xv[None, :], axis=1)
    acc += tl.load(b_ptr + rn, mask=nm, other=0.0)
    if RELU:
        acc = tl.maximum(acc, 0.0)
    tl.store(out_ptr + row * N + rn, acc, mask=nm)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        h = x.contiguous()
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        for i, lin in enumerate(linears):
            M, K = h.shape
            N = lin.out_features
            out = torch.empty((M, N), device=h.device, dtype=h.dtype)
            BLOCK_N = 64 if M >= 8 else 128
            _linear_act_kernel[(M, triton.cdiv(N, BLOCK_N))](h, lin.weight.contiguous(), lin.bias, out, N, K,
                                                            RELU=i < len(linears) - 1, BLOCK_N=BLOCK_N,
                                                            BLOCK_K=128)
            h = out
        return h
