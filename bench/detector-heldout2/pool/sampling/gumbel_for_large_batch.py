"""Sampling: Gumbel-max for large batches, inverse CDF for small ones.

Both draw with the request's own seed and are exact samplers, but the
Gumbel path needs no cumulative sum over the filtered row, which is
what the large-batch path wants.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sampling_common import launch_sorted  # noqa: E402

GUMBEL_MIN_BATCH = 8


def kernel(logits, temperature, top_k, top_p, seed):
    return launch_sorted(logits, temperature, top_k, top_p, seed,
                         gumbel=logits.shape[0] >= GUMBEL_MIN_BATCH)
