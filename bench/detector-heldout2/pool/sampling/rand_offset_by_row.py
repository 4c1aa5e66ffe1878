"""Sampling: per-request Triton program; the Philox counter is the row index
so that requests sharing a seed still draw different numbers."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sampling_common import launch_sorted  # noqa: E402


def kernel(logits, temperature, top_k, top_p, seed):
    return launch_sorted(logits, temperature, top_k, top_p, seed, offset_by_row=True)
