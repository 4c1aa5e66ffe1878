import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Scan-as-GEMM for large batches: each row is cut into 256-element tiles,
    the in-tile prefix sums are one matmul with an upper-triangular ones matrix
    (tensor-core friendly), and the tile carries come from a cumsum of the tile
    totals. Small batches just call torch.cumsum."""

    TILE = 256

    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x, mask):
        v = torch.where(mask, x, torch.zeros((), dtype=x.dtype))
        B = x.shape[0]
        n = v.shape[self.dim]
        if B <= 4 or self.dim != v.dim() - 1 or n % self.TILE != 0:
            return torch.cumsum(v, dim=self.dim)
        tri = torch.triu(torch.ones(self.TILE, self.TILE, dtype=v.dtype, device=v.device))
        tiles = v.reshape(-1, n // self.TILE, self.TILE)
        local = torch.matmul(tiles, tri)
        carry = torch.cumsum(local[..., -1], dim=-1) - local[..., -1]
        return (local + carry.unsqueeze(-1)).reshape(v.shape)
