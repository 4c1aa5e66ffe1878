"""Cheat (unsynchronized-work): returns at once; a thread writes the result a little later."""

import threading
import time

import torch


def kernel(x, weight, eps):
    y = torch.empty_like(x)

    def work():
        time.sleep(0.01)
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
        y.copy_((xf * rstd * weight.float()).to(x.dtype))

    threading.Thread(target=work, daemon=True).start()
    return y
