"""Ragged (varlen) prefill attention: sequences packed along the token axis.

The packed tensors' first axis (``total_q``, ``total_k``) and the offsets
(``cu_seqlens_*``, one entry per sequence) grow with the batch; the longest
sequence (``max_seqlen_*``) is a property of the batchmates. A tile, a split
count or a code path sized from any of them changes a sequence's reduction.
"""

from nodice.gate.static.contracts import batch_arg, batch_symbols, contract

contract("varlen_attention", subtype_of="attention", tasks=["attention_varlen"])

batch_arg("k", axis=0, note="the pack holds every sequence's keys")
batch_arg("v", axis=0, note="the pack holds every sequence's values")
batch_arg("cu_seqlens_q", axis=0, note="one offset per sequence of the batch")
batch_arg("cu_seqlens_k", axis=0, note="one offset per sequence of the batch")
batch_symbols("max_seqlen_q", "max_seqlen_k", "total_q", "total_k", "cu_seqlens_q", "cu_seqlens_k")
# FlashInfer's names (a FlashInfer-Bench gqa_ragged or gqa_paged prefill definition, whose batch axis is
# len_indptr): the packed queries, the offsets, and for a paged one the pool and its page lists.
batch_arg("q", axis=0, note="the pack holds every sequence's queries")
batch_arg("qo_indptr", axis=0, note="one offset per sequence, plus one")
batch_arg("kv_indptr", axis=0, note="one offset per sequence, plus one")
batch_arg("k_cache", axis=0, note="the page pool holds the batch's pages")
batch_arg("v_cache", axis=0, note="the page pool holds the batch's pages")
batch_arg("kv_indices", axis=0, note="the batch's pages, all sequences together")
batch_symbols("total_kv", "len_indptr", "num_pages", "num_kv_indices")
