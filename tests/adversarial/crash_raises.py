"""Failure: raises inside the call."""


def kernel(x, weight, eps):
    raise RuntimeError("launch failed: invalid configuration argument")
