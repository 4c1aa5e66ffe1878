"""Multi-head latent attention (MLA) decode over a paged latent cache.

Like split-KV decode: the latent pools (``ckv_cache``/``kpe_cache`` first axis)
hold the batch's pages, the block table is as wide as the batch's longest
request, and the longest request and the batch's total tokens are properties of
the batchmates. MLA libraries size their KV splits from them (FlashMLA's
``get_mla_metadata`` cuts the batch's blocks evenly over the SMs, FlashInfer's
MLA plan balances the batch's total KV over its CTAs), so the split *size* is
protected here as well as the split count.
"""

from nodice.gate.static.contracts import batch_arg, batch_symbols, contract, protect, reduction_tiles

contract("mla_decode", subtype_of="attention", tasks=["mla_decode"])

batch_arg("ckv_cache", axis=0, note="the latent pool grows with the batch's pages")
batch_arg("kpe_cache", axis=0, note="the RoPE-key pool grows with the batch's pages")
batch_arg("block_table", axis=1, note="the table is as wide as the batch's longest request")
# FlashInfer's CSR page lists (a FlashInfer-Bench mla_paged definition): one offset per request plus one,
# and every page of the batch.
batch_arg("kv_indptr", axis=0, note="one offset per request, plus one")
batch_arg("kv_indices", axis=0, note="the batch's pages, all requests together")
batch_symbols(
    "max_seq_len", "max_seqlen", "max_context_len", "max_num_pages", "num_pages", "total_pages", "total_kv"
)
reduction_tiles("PAGE_BLOCK", "BLOCK_PAGES", "PAGES_PER_BLOCK", "PARTITION_SIZE")
protect(
    "NUM_KV_SPLITS",
    aliases=["num_kv_splits", "num_splits", "num_sm_parts", "num_partitions", "partitions"],
    mechanism="work_partitioning",
)
protect(
    "KV_SPLIT_TOKENS",
    aliases=["kv_split_tokens", "split_tokens", "kv_chunk_size", "chunk_size", "split_size", "kv_len_limit"],
    mechanism="work_partitioning",
    guidance=(
        "fix the KV split size in tokens (a constant such as 256), so that a request's splits "
        "start at the same tokens whatever its batchmates are"
    ),
)
