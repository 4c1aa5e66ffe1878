"""VIOLATES batch invariance: the combine adds expert outputs with float atomics.

The down GEMM's epilogue adds each weighted expert row straight into the
token's fp32 sum with ``tl.atomic_add``, and tiles are laid out busiest expert
first. A token's ``top_k`` contributions are therefore summed in the order its
experts' tiles happen to run: on a GPU that order changes from run to run
(the dynamic stage's rerun of one batch exposes it), and even in a fixed
schedule (the CPU interpreter runs programs in order) it follows the
batchmates' expert loads, so the token's bits depend on its batch.
"""

import torch
import triton
import triton.language as tl

# Fixed tiles: rows per expert tile, output columns, largest reduction step.
BLOCK_M = 32
BLOCK_N = 64
MAX_BLOCK_K = 64
# Tokens per routing program.
BLOCK_T = 16


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
def _down_scatter_add(
    act_ptr,
    w_ptr,
    row_pair_ptr,
    tile_expert_ptr,
    weights_ptr,
    y_ptr,
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
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < hidden
        ks = tl.arange(0, BLOCK_K)
        a_ptrs = act_ptr + rows[:, None] * inter + ks[None, :]
        w_ptrs = w_ptr + expert.to(tl.int64) * hidden * inter + cols[None, :] * inter + ks[:, None]
        acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        for _ in range(0, inter, BLOCK_K):
            acc = tl.dot(tl.load(a_ptrs), tl.load(w_ptrs, mask=col_ok[None, :], other=0.0), acc)
            a_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        # Fused combine: each expert tile adds its weighted rows straight into the tokens' sums.
        weight = tl.load(weights_ptr + pair, mask=row_ok, other=0.0)
        out = acc.to(act_ptr.dtype.element_ty).to(tl.float32) * weight[:, None]
        token = tl.where(row_ok, pair // TOP_K, 0)
        tl.atomic_add(
            y_ptr + token[:, None] * hidden + cols[None, :], out, mask=row_ok[:, None] & col_ok[None, :]
        )


def group_by_expert(ids: torch.Tensor, n_experts: int, block_m: int):
    """Lay the (token, slot) rows out expert by expert, busiest expert first, each padded to whole tiles.

    Busiest-first is longest-job-first scheduling: the tiles of hot experts
    start early and the tail of the launch is short.
    """
    flat = ids.reshape(-1)
    n_pairs = flat.numel()
    counts = torch.bincount(flat, minlength=n_experts)
    # Position of each expert in the layout: by load, heaviest first.
    expert_order = torch.argsort(-counts, stable=True)
    slot_of_expert = torch.empty_like(expert_order)
    slot_of_expert[expert_order] = torch.arange(n_experts, device=ids.device)
    slot = slot_of_expert[flat]
    order = torch.argsort(slot, stable=True)
    counts_by_slot = counts[expert_order]
    padded = (counts_by_slot + block_m - 1) // block_m * block_m
    padded_end = torch.cumsum(padded, 0)
    start = torch.cumsum(counts_by_slot, 0) - counts_by_slot
    slot_of_sorted = slot[order]
    rank = torch.arange(n_pairs, device=ids.device) - start[slot_of_sorted]
    dest = padded_end[slot_of_sorted] - padded[slot_of_sorted] + rank
    n_tiles = triton.cdiv(n_pairs + n_experts * (block_m - 1), block_m)
    row_pair = torch.full((n_tiles * block_m,), -1, dtype=torch.int32, device=ids.device)
    row_pair[dest] = order.to(torch.int32)
    tile_start = torch.arange(n_tiles, device=ids.device) * block_m
    tile_slot = torch.searchsorted(padded_end, tile_start, right=True)
    tile_expert = torch.where(tile_slot < n_experts, expert_order[tile_slot.clamp(max=n_experts - 1)], -1).to(
        torch.int32
    )
    return row_pair, tile_expert


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
    row_pair, tile_expert = group_by_expert(ids.long(), n_experts, BLOCK_M)
    n_tiles = tile_expert.numel()
    act = torch.empty((n_tiles * BLOCK_M, inter), dtype=x.dtype, device=x.device)
    _gate_up_swiglu[(n_tiles, triton.cdiv(inter, BLOCK_N))](
        x,
        w_gate_up,
        row_pair,
        tile_expert,
        act,
        hidden,
        inter,
        TOP_K=top_k,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=block_k,
    )
    y32 = torch.zeros((n_tokens, hidden), dtype=torch.float32, device=x.device)
    _down_scatter_add[(n_tiles, triton.cdiv(hidden, BLOCK_N))](
        act,
        w_down,
        row_pair,
        tile_expert,
        weights,
        y32,
        hidden,
        inter,
        TOP_K=top_k,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=block_k,
    )
    return y32.to(x.dtype)
