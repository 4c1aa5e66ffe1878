"""Linear-attention family (gated delta rule …): one sequence is one sample.

The recurrent state of a sequence is updated in its own time order; the chunk
length of a chunked scan and the tiles of its inner products must not depend on
the batch.
"""

from nodice.gate.static.contracts import batch_symbols, contract, protect, reduction_tiles

contract("linear_attention", family="linear attention")

batch_symbols("num_seqs", "n_seqs")
reduction_tiles("BLOCK_K", "BLOCK_DK", "BLOCK_T", "BT", "CHUNK_SIZE", "chunk_size", "BK")
protect(
    "CHUNK_SIZE",
    aliases=["chunk_size", "chunk_len", "bt", "block_t"],
    mechanism="reduction_order",
    guidance=(
        "fix the chunk length of the scan (or derive it from the head dimension): a chunked scan "
        "sums the state in a chunk-dependent order"
    ),
)
