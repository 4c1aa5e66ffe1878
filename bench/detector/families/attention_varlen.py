"""Ragged (varlen) prefill candidates, built on the task's seed (a flash forward over the packed batch)."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, violating

T = "attention_varlen"

TINY_TILES = "block_m, block_n = 32, 16"
GRID = "grid = (triton.cdiv(max_seqlen_q, block_m), cu_seqlens_q.shape[0] - 1, q_heads)"
ENTRY = "_, q_heads, head_dim = q.shape"

DENSE = '''
def _dense_padded(q, k, v, cu_seqlens_q, max_seqlen, causal, sm_scale):
    """Every sequence padded to the longest, one masked dense attention over the batch."""
    batch = cu_seqlens_q.shape[0] - 1
    q_heads, kv_heads, head_dim = q.shape[1], k.shape[1], q.shape[2]
    bounds = cu_seqlens_q.tolist()
    qp = q.new_zeros((batch, max_seqlen, q_heads, head_dim), dtype=torch.float32)
    kp = k.new_zeros((batch, max_seqlen, kv_heads, head_dim), dtype=torch.float32)
    vp = torch.zeros_like(kp)
    for i in range(batch):
        n = bounds[i + 1] - bounds[i]
        qp[i, :n], kp[i, :n], vp[i, :n] = q[bounds[i] : bounds[i + 1]], k[bounds[i] : bounds[i + 1]], v[bounds[i] : bounds[i + 1]]
    group = q_heads // kv_heads
    scores = qp.transpose(1, 2) @ kp.transpose(1, 2).repeat_interleave(group, dim=1).transpose(-1, -2) * sm_scale
    lengths = torch.tensor([bounds[i + 1] - bounds[i] for i in range(batch)], device=q.device)
    cols = torch.arange(max_seqlen, device=q.device)
    keep = (cols[None, None, :] < lengths[:, None, None]).expand(batch, max_seqlen, max_seqlen)
    if causal:
        keep = keep & (cols[None, None, :] <= cols[None, :, None])
    probs = scores.masked_fill(~keep[:, None], float("-inf")).softmax(-1)
    out = (probs @ vp.transpose(1, 2).repeat_interleave(group, dim=1)).transpose(1, 2)
    o = torch.empty_like(q)
    for i in range(batch):
        o[bounds[i] : bounds[i + 1]] = out[i, : bounds[i + 1] - bounds[i]].to(q.dtype)
    return o
'''


def _seed(doc: str, *edits: tuple[str, str], append: str = "") -> str:
    return from_seed(T, doc, list(edits), append=append)


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "tile_from_max_seqlen",
            T,
            "reduction_order",
            "batch_max",
            "key tile 64 once the longest sequence of the pack passes 128 tokens, else 16",
            _seed(
                "Varlen flash attention; long packs get wide key tiles.",
                (TINY_TILES, "block_m, block_n = 32, (64 if max_seqlen_k > 128 else 16)"),
            ),
        ),
        V(
            "tile_from_total_tokens",
            T,
            "reduction_order",
            "numel",
            "key tile 32 when the pack holds 256 tokens or more, else 16",
            _seed(
                "Varlen flash attention; the key tile follows the size of the pack.",
                (TINY_TILES, "block_m, block_n = 32, (16 if q.shape[0] < 256 else 32)"),
            ),
        ),
        V(
            "dense_path_small_batch",
            T,
            "algorithm_selection",
            "branch",
            "B <= 2: pad to max_seqlen and run eager dense attention; else the packed flash kernel",
            _seed(
                "Varlen flash attention with a padded dense path for one or two sequences.",
                (
                    ENTRY,
                    """
                if cu_seqlens_q.shape[0] - 1 <= 2:
                    return _dense_padded(q, k, v, cu_seqlens_q, max_seqlen_q, causal, sm_scale)
                _, q_heads, head_dim = q.shape
                """,
                ),
                append=DENSE,
            ),
        ),
        I(
            "seed",
            T,
            "batch_in_grid",
            "The task's seed: a program per (query block, sequence, head), the grid from B and max_seqlen.",
            _seed("Varlen flash attention, the seed as it is."),
        ),
        I(
            "row_tile_from_total_tokens",
            T,
            "row_tile",
            "BLOCK_M (query rows per program) 16 or 32 from the pack's size; the key tile is fixed",
            _seed(
                "Varlen flash attention with the query-row tile chosen from the pack's size.",
                (TINY_TILES, "block_m, block_n = (16 if q.shape[0] < 256 else 32), 16"),
            ),
        ),
        I(
            "grid_from_total_tokens",
            T,
            "batch_in_grid",
            "grid axis 0 = cdiv(total_q, BLOCK_M) instead of cdiv(max_seqlen_q, BLOCK_M): more idle programs",
            _seed(
                "Varlen flash attention with a grid sized by the whole pack.",
                (GRID, "grid = (triton.cdiv(q.shape[0], block_m), cu_seqlens_q.shape[0] - 1, q_heads)"),
            ),
        ),
    ]
