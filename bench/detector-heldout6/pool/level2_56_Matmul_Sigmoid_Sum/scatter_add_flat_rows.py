import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    TILE = 16  # every GEMM call sees exactly TILE rows

    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        B = x.shape[0]
        T = self.TILE
        Bp = ((B + T - 1) // T) * T
        xp = F.pad(x, (0, 0, 0, Bp - B))
        tiles = [F.linear(xp[s:s + T], self.linear.weight, self.linear.bias) for s in range(0, Bp, T)]
        s = torch.sigmoid(torch.cat(tiles, 0)[:B])
        H = s.shape[1]
        seg = torch.arange(B, device=x.device).repeat_interleave(H)
        out = torch.zeros((B,), device=x.device, dtype=x.dtype)
        out.scatter_add_(0, seg, s.reshape(-1))
        return out.unsqueeze(1)
