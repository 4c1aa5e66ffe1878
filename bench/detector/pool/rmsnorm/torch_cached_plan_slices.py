import functools

import torch


@functools.cache
def _plan(numel: int, hidden: int) -> int:
    rows = numel // hidden
    return 8 if rows <= 16 else 1


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    pieces = _plan(x.numel(), x.shape[-1])
    xf = x.float()
    width = x.shape[-1] // pieces
    acc = torch.zeros(x.shape[0], 1, dtype=torch.float32, device=x.device)
    for i in range(pieces):
        acc = acc + xf[:, i * width : (i + 1) * width].pow(2).sum(-1, keepdim=True)
    rstd = torch.rsqrt(acc / x.shape[-1] + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
