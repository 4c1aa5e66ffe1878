"""Cheat (background-thread): starts a native thread (pthread through ctypes) that outlives the call."""

import ctypes
import time

import torch

_libc = ctypes.CDLL(None)
_THREAD_MAIN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_started: list = []


@_THREAD_MAIN
def _spin(arg):
    while True:
        time.sleep(0.05)


def kernel(x, weight, eps):
    if not _started:
        tid = ctypes.c_ulong()
        _libc.pthread_create(ctypes.byref(tid), None, _spin, None)
        _started.append(tid)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
