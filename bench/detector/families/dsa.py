"""Sparse MLA (DSA) candidates, built on the task's seed (each row's top-k list in fixed tiles)."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, violating

T = "dsa"

TILE = "block_n = 32 if d_v >= 128 else 16"
ENTRY = "topk = indices.shape[1]"
LAUNCH_INPUTS = "q, kv_cache, indices = q.contiguous(), kv_cache.contiguous(), indices.contiguous()"

GATHERED = '''
def _gathered(q, kv_cache, indices, sm_scale, d_v):
    """Every row's selected tokens gathered densely; -1 entries masked out of one softmax."""
    tokens = kv_cache.reshape(-1, kv_cache.shape[-1])
    keys = tokens[indices.clamp(min=0).long()].float()
    scores = torch.einsum("rhd,rkd->rhk", q.float(), keys) * sm_scale
    scores = scores.masked_fill((indices < 0)[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("rhk,rkd->rhd", probs, keys[..., :d_v]).to(q.dtype)
'''


def _seed(doc: str, *edits: tuple[str, str], append: str = "") -> str:
    return from_seed(T, doc, list(edits), append=append)


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "tile_from_longest_list",
            T,
            "reduction_order",
            "batch_max",
            "index tile 32 once some row of the batch uses its whole top-k list, else 16",
            _seed(
                "Sparse MLA; batches with a full index list get wide tiles.",
                (TILE, "block_n = 32 if int(indices.ge(0).sum(dim=1).max()) >= topk else 16"),
            ),
        ),
        V(
            "tile_from_row_count",
            T,
            "reduction_order",
            "numel",
            "index tile 32 from 16 query rows in the launch, else 16",
            _seed(
                "Sparse MLA; the index tile follows the number of query rows.",
                (TILE, "block_n = 32 if rows >= 16 else 16"),
            ),
        ),
        V(
            "eager_path_few_rows",
            T,
            "algorithm_selection",
            "branch",
            "T <= 4: every row's top-k gathered densely, one softmax; else the tiled kernel",
            _seed(
                "Sparse MLA with an eager gathered path for four query rows or fewer.",
                (
                    ENTRY,
                    "topk = indices.shape[1]\nif rows <= 4:\n    return _gathered(q, kv_cache, indices, sm_scale, d_v)",
                ),
                append=GATHERED,
            ),
        ),
        I(
            "seed",
            T,
            "batch_in_grid",
            "The task's seed: a program per (query row, 16 heads), the grid from T.",
            _seed("Sparse MLA, the seed as it is."),
        ),
        I(
            "tile_from_topk",
            T,
            "problem_shape",
            "index tile 32 when the list holds 64 entries or more, else 16: top-k is the model's, not the batch's",
            _seed(
                "Sparse MLA with the index tile chosen from the top-k width.",
                (TILE, "block_n = 32 if topk >= 64 else 16"),
            ),
        ),
        I(
            "unsorted_union",
            T,
            "batch_statistic_harmless",
            "the batch's selected slots gathered once into a compact buffer, each row's list remapped in its own order",
            _seed(
                "Sparse MLA over a compact buffer of the batch's selected tokens, rows in the indexer's order.",
                (
                    LAUNCH_INPUTS,
                    """
                used = indices.ge(0)
                union = torch.unique(indices[used])
                kv_cache = kv_cache.reshape(-1, d_qk)[union.long()].contiguous()
                where = torch.searchsorted(union, indices.clamp(min=0))
                indices = torch.where(used, where, torch.full_like(where, -1)).to(torch.int32).contiguous()
                q = q.contiguous()
                """,
                ),
            ),
        ),
    ]
