"""Sampling with an all-greedy fast path.

If every request in the batch is greedy, a single argmax is returned; the
general kernel handles temperature 0 by taking the first entry of the stable
descending sort, which is the same index argmax returns.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sampling_common import launch_sorted  # noqa: E402


def kernel(logits, temperature, top_k, top_p, seed):
    if bool((temperature == 0).all()):
        return torch.argmax(logits, dim=-1)
    return launch_sorted(logits, temperature, top_k, top_p, seed)
