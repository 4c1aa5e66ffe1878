"""Helpers shared by the add+RMSNorm variants in this folder."""
import os

import triton


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def bucket_for(n_tokens):
    if n_tokens <= 2:
        return "tiny"
    if n_tokens <= 512:
        return "medium"
    return "large"


def row_block(hidden):
    return triton.next_power_of_2(hidden)
