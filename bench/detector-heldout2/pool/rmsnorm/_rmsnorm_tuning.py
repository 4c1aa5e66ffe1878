"""Shared tuning helpers for the rmsnorm kernels in this folder."""
from dataclasses import dataclass

import triton


@dataclass(frozen=True)
class NormConfig:
    block: int
    num_warps: int
    rows_per_prog: int = 1


# Measured on the bench box: short batches are latency bound, so a narrow
# chunk keeps more loads in flight per row; large batches prefer wide chunks.
_SMALL_BATCH_ROWS = 8


def pick_config(n_rows: int, hidden: int) -> NormConfig:
    if n_rows <= _SMALL_BATCH_ROWS:
        return NormConfig(block=min(256, triton.next_power_of_2(hidden)), num_warps=2)
    return NormConfig(block=min(1024, triton.next_power_of_2(hidden)), num_warps=4)


def hidden_only_config(hidden: int) -> NormConfig:
    block = min(512, triton.next_power_of_2(hidden))
    return NormConfig(block=block, num_warps=4 if block >= 512 else 2)
