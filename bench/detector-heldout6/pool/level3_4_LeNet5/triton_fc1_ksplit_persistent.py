import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

NUM_SMS = 4


@triton.jit
def _fc_partial_kernel(x_ptr, w_ptr, part_ptr, N, K, K_PER, SPLIT, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    sp = tl.program_id(1)
    rn = tl.arange(0, BLOCK_N)
    nm = rn < N
    acc = tl.zeros((BLOCK_N,), tl.float32)
    lo = sp * K_PER
    for k0 in range(0, K_PER, BLOCK_K):
        rk = lo + k0 + tl.arange(0, BLOCK_K)
        km = (rk < K) & (rk < lo + K_PER)
        xv = tl.load(x_ptr + row * K + rk, mask=km, other=0.0)
        wv = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=nm[:, None] & km[None, :], other=0.0)
        acc += tl.sum(wv * xv[None, :], axis=1)
    tl.store(part_ptr + (row * SPLIT + sp) * N + rn, acc, mask=nm)


def _fc(h, lin, relu, split):
    M, K = h.shape
    N = lin.out_features
    BLOCK_K = 32
    k_per = triton.cdiv(triton.cdiv(K, split), BLOCK_K) * BLOCK_K
    part = torch.empty((M, split, N), device=h.device, dtype=torch.float32)
    _fc_partial_kernel[(M, split)](h.contiguous(), lin.weight.contiguous(), part, N, K, k_per, split,
                                   BLOCK_N=triton.next_power_of_2(N), BLOCK_K=BLOCK_K)
    y = part.sum(dim=1) + lin.bias
    return F.relu(y) if relu else y


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super(ModelNew, self).__init__()
        self.conv1 = nn.Conv2d(in_channels=1, out_channels=6, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(in_channels=6, out_channels=16, kernel_size=5, stride=1)
        self.fc1 = nn.Linear(in_features=16 * 5 * 5, out_features=120)
        self.fc2 = nn.Linear(in_features=120, out_features=84)
        self.fc3 = nn.Linear(in_features=84, out_features=num_classes)

    def forward(self, x):
        feats = []
        for i in range(x.shape[0]):
            h = F.max_pool2d(F.relu(self.conv1(x[i:i + 1])), 2, 2)
            h = F.max_pool2d(F.relu(self.conv2(h)), 2, 2)
            feats.append(h.reshape(1, -1))
        h = torch.cat(feats, 0)
        split = max(1, NUM_SMS // h.shape[0])  # persistent-style: idle SMs take K-slices of fc1
        h = _fc(h, self.fc1, True, split)
        h = _fc(h, self.fc2, True, 1)
        return _fc(h, self.fc3, False, 1)
