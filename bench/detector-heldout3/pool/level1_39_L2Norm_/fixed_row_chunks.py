import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.rows_per_chunk = 1024

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # huge batches are streamed in fixed 1024-row chunks to cap the
        # x*x temporary; every row is reduced entirely inside one chunk
        out = torch.empty_like(x)
        for start in range(0, x.shape[0], self.rows_per_chunk):
            xc = x[start:start + self.rows_per_chunk]
            norm = torch.sqrt((xc * xc).sum(dim=1, keepdim=True))
            out[start:start + self.rows_per_chunk] = xc / norm
        return out
