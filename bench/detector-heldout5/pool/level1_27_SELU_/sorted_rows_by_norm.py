import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Processes rows in order of their L1 norm (groups similar rows for the exp unit) and
    scatters the results back to their original positions."""

    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        flat = x.reshape(B, -1)
        order = torch.argsort(flat.abs().sum(dim=1))
        out = torch.empty_like(flat)
        for idx in order.tolist():
            out[idx] = torch.selu(flat[idx])
        return out.view_as(x)
