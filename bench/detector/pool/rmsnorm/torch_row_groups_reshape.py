import torch


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    b, h = xf.shape
    g = 2 if b % 2 == 0 and b >= 8 else 1
    # Rows regrouped in pairs for even batches and split back: each row is still summed on its own.
    sq = xf.reshape(b // g, g * h).pow(2).reshape(b // g, g, h).sum(-1).reshape(b, 1)
    return (xf * torch.rsqrt(sq / h + eps) * weight.float()).to(x.dtype)
