"""Split-KV (flash-decoding) attention decode.

The page pool (``k_cache``/``v_cache`` first axis) holds the batch's pages, so
its size is a batch-context quantity too; so is the longest sequence of the batch.
"""

from nodice.gate.static.contracts import batch_arg, batch_symbols, contract, protect, reduction_tiles

contract("split_kv_decode", subtype_of="attention", tasks=["attention_decode"])

batch_arg("k_cache", axis=0, note="page pool size grows with the batch's pages")
batch_arg("v_cache", axis=0, note="page pool size grows with the batch's pages")
batch_arg("block_table", axis=1, note="the table is as wide as the batch's longest request")
# FlashInfer's CSR page lists (a FlashInfer-Bench gqa_paged definition): one offset per request plus one,
# and every page of the batch.
batch_arg("kv_indptr", axis=0, note="one offset per request, plus one")
batch_arg("kv_indices", axis=0, note="the batch's pages, all requests together")
batch_symbols("max_seq_len", "max_seqlen", "max_context_len", "max_num_pages", "num_pages", "total_pages")
reduction_tiles("PAGE_BLOCK", "BLOCK_PAGES", "PAGES_PER_BLOCK", "PARTITION_SIZE")
protect(
    "NUM_KV_SPLITS",
    # Not ``max_*``: a maximum over the batch sizes a grid of idle programs, not a split.
    aliases=["num_kv_splits", "num_partitions", "partitions"],
    mechanism="work_partitioning",
)
