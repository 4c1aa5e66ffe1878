import torch


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # Small batches are cheap: accumulate them in double precision.
    acc = torch.float64 if x.shape[0] < 8 else torch.float32
    xa = x.to(acc)
    rstd = torch.rsqrt(xa.pow(2).mean(-1, keepdim=True) + eps)
    return (xa * rstd * weight.to(acc)).to(x.dtype)
