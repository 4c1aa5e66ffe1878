"""Gated delta rule, recurrent Triton kernel with a fixed value block."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gdn_common import launch  # noqa: E402


def kernel(q, k, v, g, beta, scale):
    return launch(q, k, v, g, beta, scale)
