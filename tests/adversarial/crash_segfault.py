"""Failure: reads through a wild pointer inside the call (SIGSEGV)."""

import ctypes


def kernel(x, weight, eps):
    return ctypes.cast(8, ctypes.POINTER(ctypes.c_int64))[0]
