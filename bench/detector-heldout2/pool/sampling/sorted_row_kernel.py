"""Sampling: stable sort, then one Triton program per request.

The program filters its sorted row (temperature, top-k, top-p), renormalises
and draws by inverse CDF with Philox keyed by the request's own seed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sampling_common import launch_sorted  # noqa: E402


def kernel(logits, temperature, top_k, top_p, seed):
    return launch_sorted(logits, temperature, top_k, top_p, seed)
