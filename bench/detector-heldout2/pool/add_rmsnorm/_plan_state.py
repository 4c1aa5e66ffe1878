"""Module-level launch plan shared by the add+RMSNorm planner and launcher."""
import triton

PLAN = {"vec": 512, "warps": 4}


def prepare(n_tokens, hidden):
    """Refresh the global plan for the next launch."""
    block = triton.next_power_of_2(hidden)
    if n_tokens < 8:
        PLAN["vec"] = min(128, block)   # latency regime: short vectors, more rows in flight
        PLAN["warps"] = 2
    else:
        PLAN["vec"] = min(512, block)
        PLAN["warps"] = 4
