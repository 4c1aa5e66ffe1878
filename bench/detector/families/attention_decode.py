"""Paged attention-decode candidates, built on the task's seed (split-KV with a fixed split size)."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, violating

T = "attention_decode"

TILES = """
    block_n = 64 if head_dim >= 64 else 32
    split_tokens = 4 * block_n
"""


def _seed(doc: str, *edits: tuple[str, str], append: str = "") -> str:
    return from_seed(T, doc, list(edits), append=append)


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "split_size_small_batch",
            T,
            "work_partitioning",
            "direct",
            "one-tile splits (more parallelism) for batches of at most two requests",
            _seed(
                "Paged decode attention, split-KV; tiny batches split every KV tile.",
                (
                    TILES,
                    """
                block_n = 64 if head_dim >= 64 else 32
                # Few requests leave programs idle: split finer.
                split_tokens = block_n if batch <= 2 else 4 * block_n
                """,
                ),
            ),
        ),
        V(
            "split_count_from_batch",
            T,
            "work_partitioning",
            "classic_num_splits",
            "the flash-decoding heuristic: a split count from batch and heads, the split size from it",
            _seed(
                "Paged decode attention with the split count chosen to fill the machine.",
                (
                    TILES,
                    """
                block_n = 64 if head_dim >= 64 else 32
                target_programs = 16 if q.device.type == "cpu" else 264
                num_splits = max(1, min(8, target_programs // (batch * kv_heads)))
                longest = block_table.shape[1] * page
                split_tokens = max(block_n, triton.cdiv(triton.cdiv(longest, num_splits), block_n) * block_n)
                """,
                ),
            ),
        ),
        V(
            "split_size_from_table_width",
            T,
            "work_partitioning",
            "batchmate_dependent",
            "four splits of the widest request's length: the split size follows the batchmates",
            _seed(
                "Paged decode attention; every request is cut into four splits of the batch's widest table.",
                (
                    TILES,
                    """
                block_n = 64 if head_dim >= 64 else 32
                widest = block_table.shape[1] * page
                split_tokens = max(block_n, triton.cdiv(triton.cdiv(widest, 4), block_n) * block_n)
                """,
                ),
            ),
        ),
        V(
            "kv_tile_from_batch",
            T,
            "reduction_order",
            "direct",
            "KV tile 16 for batches under 3, else the head-dim default",
            _seed(
                "Paged decode attention; small batches use narrow KV tiles.",
                (
                    TILES,
                    """
                block_n = 64 if head_dim >= 64 else 32
                if batch < 3:
                    block_n = 16
                split_tokens = 4 * 32
                """,
                ),
            ),
        ),
        I(
            "fixed_split_size",
            T,
            "batch_in_grid",
            "the seed: split size and tiles from the head dim only",
            _seed("Paged decode attention, split-KV with a fixed split size and an in-order combine."),
        ),
        I(
            "grid_from_longest_request",
            T,
            "batchmate_grid",
            "the split grid is sized from the longest request in the batch; splits past a request's end exit",
            _seed(
                "Paged decode attention; the grid covers the longest request's splits only.",
                (
                    """
                max_splits = triton.cdiv(table_width * page, split_tokens)
                """,
                    """
                max_splits = max(1, triton.cdiv(int(seq_lens.max()) if batch else 1, split_tokens))
                """,
                ),
            ),
        ),
        I(
            "loop_over_requests",
            T,
            "sample_loop",
            "one launch per request",
            _seed(
                "Paged decode attention launched request by request.",
                (
                    """
                def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
                """,
                    """
                def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
                    return torch.cat(
                        [
                            _decode_one(q[i : i + 1], k_cache, v_cache, block_table[i : i + 1], seq_lens[i : i + 1], sm_scale)
                            for i in range(q.shape[0])
                        ]
                    )


                def _decode_one(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
                """,
                ),
            ),
        ),
        I(
            "empty_batch_and_asserts",
            T,
            "output_alloc_empty_exit",
            "an assert on the batch's shapes and an early return for an empty batch",
            _seed(
                "Paged decode attention with input checks.",
                (
                    """
                    batch, q_heads, head_dim = q.shape
                """,
                    """
                    batch, q_heads, head_dim = q.shape
                    assert block_table.shape[0] == batch and seq_lens.shape[0] == batch, "one table row per request"
                    if batch == 0:
                        return torch.empty_like(q)
                """,
                ),
            ),
        ),
    ]
