"""Sparse MLA (DeepSeek sparse attention): every query row attends to its own top-k cache slots.

The page pool (``kv_cache``'s first axis) holds the batch's pages and the
offsets (``cu_seqlens_q``) one entry per request, so both grow with the batch;
the query rows and their index lists carry the batch axis itself. A split of
the top-k list, an index tile or a code path sized from any of them (or from
the longest request's count of valid indices) changes a row's reduction.
"""

from nodice.gate.static.contracts import batch_arg, batch_symbols, contract, protect, reduction_tiles

contract("sparse_mla", subtype_of="attention", tasks=["dsa"])

batch_arg("kv_cache", axis=0, note="the page pool grows with the batch's pages")
batch_arg("cu_seqlens_q", axis=0, note="one offset per request of the batch")
batch_symbols("total_q", "num_q_tokens", "num_query_rows", "max_topk_len", "max_valid", "longest")
reduction_tiles("BLOCK_TOPK", "TOPK_BLOCK", "BLOCK_IDX", "INDEX_BLOCK")
protect(
    "NUM_SPLITS",
    # FlashMLA's scheduler splits each row's top-k list over ``num_sm_parts`` programs.
    aliases=["num_sm_parts", "num_topk_splits", "topk_splits", "index_splits"],
    mechanism="work_partitioning",
)
