import torch


class Planner:
    def __init__(self, rows: int, hidden: int):
        self.rows = rows
        self.hidden = hidden

    @property
    def pieces(self) -> int:
        return 4 if self.rows * self.hidden < 16 * 1024 else 1


def kernel(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    plan = Planner(*x.shape)
    xf = x.float()
    parts = xf.tensor_split(plan.pieces, dim=-1)
    sq = torch.stack([p.pow(2).sum(-1) for p in parts], 0).sum(0, keepdim=False)
    rstd = torch.rsqrt(sq.unsqueeze(-1) / x.shape[-1] + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
