import torch


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    b, h = x.shape
    g = 4 if b < 16 else 1
    xf = x.float().view(b, g, h // g)
    sq = xf.pow(2).sum(-1).sum(-1, keepdim=True) if g > 1 else x.float().pow(2).sum(-1, keepdim=True)
    return (x.float() * torch.rsqrt(sq / h + eps) * weight.float()).to(x.dtype)
