"""MoE (top-k routing, SwiGLU experts, weighted combine): the seed's kernels with pinned expert tiles.

Five Triton kernels: ``_route`` (softmax over the router logits, top-k by repeated argmax, weights
renormalised, as in the seed), ``_group`` (the (token, slot) rows laid out expert by expert, each
expert padded to whole tiles: a counting sort in one launch, where the seed's torch grouping takes
a dozen small kernels and a device-to-host sync in ``torch.bincount``), ``_gate_up_swiglu`` and
``_down`` (grouped GEMMs, one program per (expert tile, column block)), and ``_combine`` (each
token's slots summed in slot order).

The other change against the seed is the tiling: 64-row expert tiles (the seed's 32 re-read every
expert's weights twice as often at prefill), 128 output columns, 4 warps and 4 pipeline stages in
both grouped GEMMs. The values were read off a sweep on the H200 (``bench/gpu/candidates/
sweep_moe.py``, 2026-12-02): a tile height chosen from the expected rows per active expert
(16–128) was slower than 64 rows for every batch (0.84× against 0.90× the best baseline's
geomean in the same sweep).

Batch invariance: nothing here depends on the batch. ``BLOCK_M``, ``BLOCK_N`` and the launch
settings are constants; ``BLOCK_K`` comes from the weights' shapes. A row's dot products
accumulate over ``H`` (then ``I``) in the same ``BLOCK_K`` steps whatever else is in its tile,
and a tile holds rows of one expert only, so padding rows never meet a real row's sums. The
grouping is a stable sort (an expert's rows in token order), and the combine adds a token's slots
in slot order. No atomics, no split-K.

Measured on the H200 (2026-12-03, torch 2.11, Triton 3.6; the whole gate passed on CUDA;
``bench/results/h200_2026-12-03/call1/check_moe.json``): 58.1 TFLOP/s geomean over the twelve
workloads, 1.31–2.33× torch's ``grouped_mm`` at eleven of them and 0.81× at mixtral-8x7b-prefill4k
(eight experts of ~1000 rows: a dense GEMM, where cuBLAS's tiles win); 1.06–2.08× Liger's fused MoE.
With the seed's torch grouping the same GEMMs measured 33.4 TFLOP/s (0.93× ``grouped_mm``).
"""

import torch
import triton
import triton.language as tl

# Rows per expert tile and output columns per tile, for every batch; the largest reduction step
# (the actual one comes from the weights' shapes).
BLOCK_M = 64
BLOCK_N = 128
MAX_BLOCK_K = 64
GATE_UP_WARPS, GATE_UP_STAGES = 4, 4
DOWN_WARPS, DOWN_STAGES = 4, 4
# Tokens per routing / combine program.
BLOCK_T = 16
# Pairs placed per grouping program, and tiles labelled per step of it.
GROUP_CHUNK = 128
GROUP_TILES = 64
# Ids histogrammed per step when a grouping program counts every expert's rows.
GROUP_COUNT_CHUNK = 2048


@triton.jit
def _route(
    logits_ptr,
    ids_ptr,
    weights_ptr,
    n_tokens,
    n_experts,
    TOP_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_TOPK: tl.constexpr,
):
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    experts = tl.arange(0, BLOCK_E)
    token_ok = tokens < n_tokens
    expert_ok = experts < n_experts
    logits = tl.load(
        logits_ptr + tokens[:, None] * n_experts + experts[None, :],
        mask=token_ok[:, None] & expert_ok[None, :],
        other=0.0,
    )
    # Padding experts must never be picked; padding tokens are never stored.
    logits = tl.where(expert_ok[None, :], logits, float("-inf"))
    p = tl.exp(logits - tl.max(logits, axis=1)[:, None])
    probs = p / tl.sum(p, axis=1)[:, None]
    slots = tl.arange(0, BLOCK_TOPK)
    chosen = tl.full([BLOCK_T, BLOCK_TOPK], 0, tl.float32)
    total = tl.full([BLOCK_T], 0, tl.float32)
    for j in tl.static_range(TOP_K):
        best = tl.max(probs, axis=1)
        idx = tl.min(tl.where(probs == best[:, None], experts[None, :], BLOCK_E), axis=1)
        tl.store(ids_ptr + tokens * TOP_K + j, idx, mask=token_ok)
        chosen = tl.where(slots[None, :] == j, best[:, None], chosen)
        total += best
        probs = tl.where(experts[None, :] == idx[:, None], -1.0, probs)
    weight_ptrs = weights_ptr + tokens[:, None] * TOP_K + slots[None, :]
    tl.store(weight_ptrs, chosen / total[:, None], mask=token_ok[:, None] & (slots[None, :] < TOP_K))


@triton.jit
def _gate_up_swiglu(
    x_ptr,
    w_ptr,
    row_pair_ptr,
    tile_expert_ptr,
    act_ptr,
    hidden,
    inter,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    tile = tl.program_id(0)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        pair = tl.load(row_pair_ptr + rows)
        row_ok = pair >= 0
        token = tl.where(row_ok, pair // TOP_K, 0)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < inter
        ks = tl.arange(0, BLOCK_K)
        # BLOCK_K divides H, so only the rows (padding) and columns (tail) need masks.
        a_ptrs = x_ptr + token[:, None] * hidden + ks[None, :]
        gate_ptrs = w_ptr + expert.to(tl.int64) * 2 * inter * hidden + cols[None, :] * hidden + ks[:, None]
        up_ptrs = gate_ptrs + inter * hidden
        a_mask = row_ok[:, None]
        w_mask = col_ok[None, :]
        acc_gate = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        acc_up = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        for _ in range(0, hidden, BLOCK_K):
            a = tl.load(a_ptrs, mask=a_mask, other=0.0)
            acc_gate = tl.dot(a, tl.load(gate_ptrs, mask=w_mask, other=0.0), acc_gate)
            acc_up = tl.dot(a, tl.load(up_ptrs, mask=w_mask, other=0.0), acc_up)
            a_ptrs += BLOCK_K
            gate_ptrs += BLOCK_K
            up_ptrs += BLOCK_K
        act = acc_gate / (1.0 + tl.exp(-acc_gate)) * acc_up
        tl.store(
            act_ptr + rows[:, None] * inter + cols[None, :], act.to(act_ptr.dtype.element_ty), mask=w_mask
        )


@triton.jit
def _down(
    act_ptr,
    w_ptr,
    tile_expert_ptr,
    out_ptr,
    hidden,
    inter,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    tile = tl.program_id(0)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < hidden
        ks = tl.arange(0, BLOCK_K)
        a_ptrs = act_ptr + rows[:, None] * inter + ks[None, :]
        w_ptrs = w_ptr + expert.to(tl.int64) * hidden * inter + cols[None, :] * inter + ks[:, None]
        w_mask = col_ok[None, :]
        acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        for _ in range(0, inter, BLOCK_K):
            acc = tl.dot(tl.load(a_ptrs), tl.load(w_ptrs, mask=w_mask, other=0.0), acc)
            a_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        tl.store(
            out_ptr + rows[:, None] * hidden + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=w_mask
        )


@triton.jit
def _combine(
    out_ptr,
    pair_row_ptr,
    weights_ptr,
    y_ptr,
    n_tokens,
    hidden,
    TOP_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    token_ok = tokens < n_tokens
    mask = token_ok[:, None] & (cols[None, :] < hidden)
    acc = tl.full([BLOCK_T, BLOCK_N], 0, tl.float32)
    # Slot order, every time: the token's sum never depends on other tokens.
    for j in tl.static_range(TOP_K):
        row = tl.load(pair_row_ptr + tokens * TOP_K + j, mask=token_ok, other=0)
        w = tl.load(weights_ptr + tokens * TOP_K + j, mask=token_ok, other=0.0)
        o = tl.load(out_ptr + row[:, None] * hidden + cols[None, :], mask=mask, other=0.0)
        acc += w[:, None] * o.to(tl.float32)
    tl.store(y_ptr + tokens[:, None] * hidden + cols[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _group(
    ids_ptr,
    row_pair_ptr,
    pair_row_ptr,
    tile_expert_ptr,
    n_pairs,
    n_experts,
    n_tiles,
    BLOCK_M: tl.constexpr,
    CHUNK: tl.constexpr,
    COUNT_CHUNK: tl.constexpr,
    BLOCK_E: tl.constexpr,
    TILES: tl.constexpr,
):
    # Program c places the pairs c·CHUNK … c·CHUNK + CHUNK - 1. Every program histograms all the
    # ids itself (integer counts, read from L2): no second launch, no device-wide sync, no atomics.
    c = tl.program_id(0)
    experts = tl.arange(0, BLOCK_E)
    offs = tl.arange(0, CHUNK)
    total = tl.zeros([BLOCK_E], dtype=tl.int32)
    before = tl.zeros([BLOCK_E], dtype=tl.int32)
    for j in range(0, n_pairs, COUNT_CHUNK):
        idx = j + tl.arange(0, COUNT_CHUNK)
        ok = idx < n_pairs
        e = tl.load(ids_ptr + idx, mask=ok, other=0)
        total += tl.histogram(e, BLOCK_E, mask=ok)
        before += tl.histogram(e, BLOCK_E, mask=idx < c * CHUNK)
    padded = (total + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    padded_end = tl.cumsum(padded, 0)
    seg_start = padded_end - padded
    # This chunk's pairs, in pair order: an expert's rows stay in token order (a stable layout).
    idx = c * CHUNK + offs
    ok = idx < n_pairs
    e = tl.load(ids_ptr + idx, mask=ok, other=BLOCK_E)
    same = (e[:, None] == e[None, :]) & (offs[None, :] < offs[:, None])
    rank = tl.sum(same.to(tl.int32), axis=1)
    onehot = e[:, None] == experts[None, :]
    base = tl.sum(tl.where(onehot, (seg_start + before)[None, :], 0), axis=1)
    dest = base + rank
    tl.store(row_pair_ptr + dest, idx, mask=ok)
    tl.store(pair_row_ptr + idx, dest, mask=ok)
    # The expert of each tile: how many experts' padded ranges end at or before the tile's start.
    end_ok = tl.where(experts < n_experts, padded_end, 2**30)
    for t0 in range(c * TILES, n_tiles, tl.num_programs(0) * TILES):
        tiles = t0 + tl.arange(0, TILES)
        done = tl.sum((end_ok[None, :] <= (tiles * BLOCK_M)[:, None]).to(tl.int32), axis=1)
        tl.store(tile_expert_ptr + tiles, tl.where(done < n_experts, done, -1), mask=tiles < n_tiles)


def group_by_expert(ids: torch.Tensor, n_experts: int, block_m: int):
    """Lay the (token, slot) rows out expert by expert, each expert padded to whole tiles.

    ``ids`` holds each pair's expert (int32, pair index ``token·top_k + slot``). Returns
    ``row_pair`` (the pair held by each grouped row, -1 for padding), ``tile_expert`` (the expert
    of each tile, -1 past the end) and ``pair_row`` (where each pair's row landed). Sizes are upper
    bounds computed from the shapes alone, and one kernel does the counting sort, so nothing waits
    for the GPU (``torch.bincount`` would: it reads the largest id back to size its output).
    """
    flat = ids.reshape(-1)
    n_pairs = flat.numel()
    n_tiles = triton.cdiv(n_pairs + n_experts * (block_m - 1), block_m)
    row_pair = torch.full((n_tiles * block_m,), -1, dtype=torch.int32, device=ids.device)
    pair_row = torch.empty(n_pairs, dtype=torch.int32, device=ids.device)
    tile_expert = torch.empty(n_tiles, dtype=torch.int32, device=ids.device)
    _group[(triton.cdiv(n_pairs, GROUP_CHUNK),)](
        flat,
        row_pair,
        pair_row,
        tile_expert,
        n_pairs,
        n_experts,
        n_tiles,
        BLOCK_M=block_m,
        CHUNK=GROUP_CHUNK,
        COUNT_CHUNK=GROUP_COUNT_CHUNK,
        BLOCK_E=triton.next_power_of_2(n_experts),
        TILES=GROUP_TILES,
        num_warps=4,
    )
    return row_pair, tile_expert, pair_row


def kernel(x, router_logits, w_gate_up, w_down, top_k):
    n_tokens, hidden = x.shape
    n_experts, inter = w_down.shape[0], w_down.shape[2]
    # The reduction step depends on the weights' shapes only: the largest power of two
    # (up to MAX_BLOCK_K) dividing both H and I, so no K tail needs masking.
    block_k = min(MAX_BLOCK_K, (hidden & -hidden), (inter & -inter))
    if block_k < 16:
        raise ValueError(f"H={hidden} and I={inter} must be multiples of 16 (tensor-core tiles)")
    ids = torch.empty((n_tokens, top_k), dtype=torch.int32, device=x.device)
    weights = torch.empty((n_tokens, top_k), dtype=torch.float32, device=x.device)
    _route[(triton.cdiv(n_tokens, BLOCK_T),)](
        router_logits,
        ids,
        weights,
        n_tokens,
        n_experts,
        TOP_K=top_k,
        BLOCK_T=BLOCK_T,
        BLOCK_E=triton.next_power_of_2(n_experts),
        BLOCK_TOPK=triton.next_power_of_2(top_k),
    )
    block_m = BLOCK_M
    row_pair, tile_expert, pair_row = group_by_expert(ids, n_experts, block_m)
    n_tiles = tile_expert.numel()
    act = torch.empty((n_tiles * block_m, inter), dtype=x.dtype, device=x.device)
    _gate_up_swiglu[(n_tiles, triton.cdiv(inter, BLOCK_N))](
        x,
        w_gate_up,
        row_pair,
        tile_expert,
        act,
        hidden,
        inter,
        TOP_K=top_k,
        BLOCK_M=block_m,
        BLOCK_N=BLOCK_N,
        BLOCK_K=block_k,
        num_warps=GATE_UP_WARPS,
        num_stages=GATE_UP_STAGES,
    )
    out = torch.empty((n_tiles * block_m, hidden), dtype=x.dtype, device=x.device)
    _down[(n_tiles, triton.cdiv(hidden, BLOCK_N))](
        act,
        w_down,
        tile_expert,
        out,
        hidden,
        inter,
        BLOCK_M=block_m,
        BLOCK_N=BLOCK_N,
        BLOCK_K=block_k,
        num_warps=DOWN_WARPS,
        num_stages=DOWN_STAGES,
    )
    y = torch.empty_like(x)
    _combine[(triton.cdiv(n_tokens, BLOCK_T), triton.cdiv(hidden, BLOCK_N))](
        out,
        pair_row,
        weights,
        y,
        n_tokens,
        hidden,
        TOP_K=top_k,
        BLOCK_T=BLOCK_T,
        BLOCK_N=BLOCK_N,
    )
    return y
