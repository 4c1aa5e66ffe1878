"""Tuning heuristics shared by the GEMM kernels."""


def pick_split_k(m: int, n: int, k: int) -> int:
    # Skinny problems leave most programs idle: split the K loop instead.
    if m <= 4 and k >= 256:
        return 2
    return 1
