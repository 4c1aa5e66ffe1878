import torch


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    # Fewer rows: split the hidden dim into more partial sums "for parallelism".
    parts = 4 if x.shape[0] < 32 else 1
    sq = sum(p.pow(2).sum(-1, keepdim=True) for p in torch.chunk(xf, parts, dim=-1))
    rstd = torch.rsqrt(sq / x.shape[-1] + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
