"""Failure: ends the process with os._exit in the middle of the call."""

import os


def kernel(x, weight, eps):
    os._exit(3)
