"""Failure: raises SystemExit while being imported."""

import sys

sys.exit(0)


def kernel(x, weight, eps):
    return x
