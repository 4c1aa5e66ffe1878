"""Cheat (background-thread): keeps a worker thread busy between calls, off the clock."""

import queue
import threading

import torch

_jobs: "queue.Queue[object]" = queue.Queue()


def _worker():
    while True:
        _jobs.get()


def kernel(x, weight, eps):
    if not any(t.name == "prefetch" for t in threading.enumerate()):
        threading.Thread(target=_worker, name="prefetch", daemon=True).start()
    _jobs.put(x.shape)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
