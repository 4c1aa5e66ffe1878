"""GEMM family: a row of ``a`` (a token through a linear layer) is one sample.

M (rows of ``a``) is the batch axis; K is the reduction axis, so the K tile,
split-K and the warp layout of the K loop must not depend on M.
"""

from nodice.gate.static.contracts import batch_symbols, contract, reduction_tiles

contract("gemm", family="gemm")

batch_symbols("M", "num_rows", "m")
reduction_tiles("BLOCK_K", "BLOCK_SIZE_K", "TILE_K", "BK", "block_k", "K_TILE")
