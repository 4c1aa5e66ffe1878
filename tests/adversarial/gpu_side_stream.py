"""Cheat (unsynchronized-work, CUDA): computes on a side stream the caller never waits for."""

import torch

_side = None


def kernel(x, weight, eps):
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    y = torch.empty_like(x)
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        torch.cuda._sleep(20_000_000)  # ~10 ms of "work": it lands after the call returned
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
        y.copy_((xf * rstd * weight.float()).to(x.dtype))
    return y
