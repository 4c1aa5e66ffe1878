"""Failure: never finishes importing."""

import time

while True:
    time.sleep(1)


def kernel(x, weight, eps):
    return x
