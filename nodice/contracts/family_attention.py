"""Attention family (prefill, decode): one sequence or one request is one sample.

The reduction runs over the KV axis: its tile, its split count and the
online-softmax combine order must come from the sequence's own length, never
from the batch or the batchmates' lengths.
"""

from nodice.gate.static.contracts import batch_symbols, contract, protect, reduction_tiles

contract("attention", family="attention")

batch_symbols("num_seqs", "num_heads_total", "batch_heads", "bh", "Z", "max_seq_len", "max_seqlen", "max_len")
reduction_tiles("BLOCK_N", "BLOCK_KV", "BLOCK_SIZE_N", "BLOCK_DMODEL_KV", "KV_BLOCK", "TILE_KV", "block_n")
protect(
    "NUM_KV_SPLITS",
    aliases=["num_kv_splits", "kv_splits", "num_splits_kv", "n_kv_splits", "num_segments"],
    mechanism="work_partitioning",
    guidance=(
        "fix the KV split size, not the number of splits: split each sequence into chunks of a "
        "constant length (e.g. 256 tokens), so a request's split count depends on its own length only"
    ),
)
