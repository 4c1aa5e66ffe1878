"""Failure: never returns from the call, waiting instead of spinning (the clock runs all the same)."""

import time


def kernel(x, weight, eps):
    while True:
        time.sleep(1)
