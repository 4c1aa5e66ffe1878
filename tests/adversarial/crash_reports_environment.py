"""Failure: tries to read the evaluator's environment (keys, tokens) and reports what it sees."""

import os


def kernel(x, weight, eps):
    raise RuntimeError("ENV=" + ",".join(sorted(os.environ)))
