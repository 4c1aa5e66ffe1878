"""MLA decode candidates, built on the task's seed (split-KV over the paged latent, a fixed split size)."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, violating

T = "mla_decode"

SCHEDULE = "block_n, split_tokens = BLOCK_N, SPLIT_TOKENS"
GRID = "max_splits = triton.cdiv(table_width * page, split_tokens)"
COMBINE_WARPS = """
    SPLIT_TOKENS=split_tokens,
    num_warps=4,
"""


def _seed(doc: str, *edits: tuple[str, str]) -> str:
    return from_seed(T, doc, list(edits))


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "split_count_from_batch",
            T,
            "work_partitioning",
            "classic_num_splits",
            "FlashMLA-style: splits = clamp(132 // (B·head blocks), 1, 16), split size = longest request / splits",
            _seed(
                "MLA decode with the split count chosen to fill the SMs.",
                (
                    SCHEDULE,
                    """
                num_splits = max(1, min(16, 132 // (batch * triton.cdiv(heads, BLOCK_H))))
                block_n = BLOCK_N
                split_tokens = BLOCK_N * triton.cdiv(triton.cdiv(int(seq_lens.max()), num_splits), BLOCK_N)
                """,
                ),
            ),
        ),
        V(
            "split_size_from_total_pages",
            T,
            "work_partitioning",
            "batchmate_dependent",
            "FlashInfer MLA plan-style: the batch's pages spread evenly over 132 SMs, whole pages per split",
            _seed(
                "MLA decode with splits balanced over the batch's pages.",
                (
                    SCHEDULE,
                    """
                total_pages = int(((seq_lens.long() + page - 1) // page).sum())
                block_n, split_tokens = BLOCK_N, page * max(1, triton.cdiv(total_pages, 132))
                """,
                ),
            ),
        ),
        V(
            "tile_from_longest",
            T,
            "reduction_order",
            "batch_max",
            "KV tile 64 once the batch's longest request passes 128 tokens, else 16; split size fixed",
            _seed(
                "MLA decode; batches with a long request get wide KV tiles.",
                (SCHEDULE, "block_n, split_tokens = (64 if int(seq_lens.max()) > 128 else 16), SPLIT_TOKENS"),
            ),
        ),
        I(
            "seed",
            T,
            "batch_in_grid",
            "The task's seed: a program per (request, head block, split), the grid from B and the table width.",
            _seed("MLA decode, the seed as it is."),
        ),
        I(
            "grid_from_pool_pages",
            T,
            "batchmate_grid",
            "split axis of the grid sized by the whole latent pool instead of the widest table: more idle programs",
            _seed(
                "MLA decode with a grid sized by the page pool.",
                (GRID, "max_splits = triton.cdiv(ckv_cache.shape[0] * page, split_tokens)"),
            ),
        ),
        I(
            "combine_warps_from_batch",
            T,
            "launch_option_harmless",
            "num_warps of the split-combine kernel 8 for more than 16 requests, else 4 (it reduces over no lane)",
            _seed(
                "MLA decode with the combine kernel's warps chosen from the batch.",
                (COMBINE_WARPS, "SPLIT_TOKENS=split_tokens,\nnum_warps=8 if batch > 16 else 4,"),
            ),
        ),
    ]
