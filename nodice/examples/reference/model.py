"""Reference (KernelBench convention): RMSNorm over the last axis of a batch of rows.

``nodice check seed.py --reference model.py`` judges a ``ModelNew`` against this
``Model``: a sample is one row (dim 0 is the batch axis), the batch of
``get_inputs()`` is the full batch, and ``ModelNew`` gets ``Model``'s weight.
"""

import torch
from torch import nn

batch_size = 16
hidden = 1024


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        # A trained-looking weight, so a ModelNew that ignores it is visibly wrong.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x.float() * rstd * self.weight.float()).to(x.dtype)


def get_inputs():
    return [1.5 * torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
