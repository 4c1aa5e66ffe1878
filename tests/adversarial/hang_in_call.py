"""Failure: never returns from the call."""


def kernel(x, weight, eps):
    while True:
        pass
