"""Normalization family (rmsnorm, add_rmsnorm, layernorm): one row is one sample.

The reduction runs over the hidden axis; its tile and the number of programs
that share a row must come from the hidden size only.
"""

from nodice.gate.static.contracts import batch_symbols, contract, protect, reduction_tiles

contract("normalization", family="normalization")

batch_symbols("num_rows", "rows", "n_rows", "M")
reduction_tiles(
    "BLOCK_H", "BLOCK_SIZE", "BLOCK_N", "BLOCK_D", "BLOCK_HIDDEN", "TILE_H", "block_h", "block_size"
)
protect(
    "ROW_SPLITS",
    aliases=["row_splits", "splits_per_row", "programs_per_row", "chunks_per_row", "num_row_chunks"],
    mechanism="work_partitioning",
    guidance=(
        "reduce each row in one program (or in a fixed number of chunks of fixed size); the number "
        "of programs per row must not grow when the batch is small"
    ),
)
