"""MoE (top-k routing, SwiGLU experts, weighted combine): grouped GEMMs with tiles per model shape.

Triton kernels: ``_route`` (softmax over the router logits, top-k by repeated argmax, weights
renormalised, as in the seed), ``_group`` (the (token, slot) rows laid out expert by expert, each
expert padded to whole tiles: a counting sort in one launch, where the seed's torch grouping takes
a dozen small kernels and a device-to-host sync in ``torch.bincount``), ``_gate_up_swiglu`` and
``_down`` (grouped GEMMs, one program per (expert tile, column block)), and ``_combine`` (each
token's slots summed in slot order); ``_gather_rows`` for the wide table below.

Two tile tables, chosen from the model's shapes only:

- **The many-expert table** (64-row expert tiles, 128 output columns, 4 warps, 4 pipeline stages,
  pointer loads): the seed's 32-row tiles re-read every expert's weights twice as often at
  prefill; a tile height chosen from the expected rows per active expert (16–128) was slower than
  64 rows for every batch (H200 sweep, 2026-12-02; ``lab/NOTEBOOK.md``).
- **The few-wide-experts table** (at most ``WIDE_MAX_EXPERTS`` experts of at least
  ``WIDE_MIN_INTER`` columns: Mixtral-8x7B's 8 × 14336), where prefill is a few dense GEMMs of
  ~1000 rows per expert: 128 × 128 tiles with 8 warps and 3 stages; the routed rows of ``x`` first
  copied into expert order (``_gather_rows``, padding rows zero) so the gate/up GEMM's A operand
  is a contiguous matrix; programs in groups of ``WIDE_GROUP_M`` expert tiles, so consecutive
  programs walk the column blocks of a few tiles and reuse a weight column block from L2.
  TMA tensor descriptors for the weights (``WIDE_DESCRIPTORS``) exist as a pin; on the H200 they
  were no faster than pointer loads at prefill and 5 % slower at decode, so they are off.

Batch invariance: nothing here depends on the batch. The table is chosen from (experts, top-k, H,
I), ``BLOCK_K`` from H and I (the largest power of two up to 64 dividing both, so no K tail), and
the load path (descriptors or pointers) from the device and the weights' layout. A row's dot
products accumulate over ``H`` (then ``I``) in the same ``BLOCK_K`` steps, from the first to the
last, in one fp32 accumulator, whatever batch it arrived in: the tile height only decides which
rows share a program (and, within a model, it is the same for every batch), a tile holds rows of
one expert only, and padding rows are rows of their own (zeros in, discarded out) that never
enter a real row's sums. The program order decides which program runs when, never how a tile is
computed; descriptors and copied rows move the same values as pointer loads. The grouping is a
stable sort (an expert's rows in token order), the combine adds a token's slots in slot order.
No atomics, no split-K.

Measured on the H200 (2026-12-04, torch 2.11, Triton 3.6; ``lab/results/h200_2026-12-04/callC/``,
the wide-table sweep, ratios of times in one sweep): the wide table runs mixtral-8x7b-prefill4k
1.40× faster than the many-expert table and 1.03× torch ``grouped_mm``; Mixtral decode at 16 and 256
tokens 0.88× and 1.04× the many-expert table, 1.63× and 1.57× ``grouped_mm``; the other models are
unchanged (the same kernels). A bf16 bitwise check at Mixtral's shapes (a token alone against
batches of 2 to 4096) passed for every table (the sweep ran this file as a candidate with
descriptors on; the knob search below now covers these settings, each checked bit for bit
on every workload, Mixtral's included, before it is timed). In the report
(``bench/results/kernels_h200.json``, the whole gate passed on CUDA): 59.2 TFLOP/s geomean, ≥
``grouped_mm`` at all twelve workloads (1.04× at mixtral-8x7b-prefill4k, 1.24–2.92× elsewhere) and ≥
Liger's fused MoE at all twelve.
"""

import torch
import triton
import triton.language as tl

# The bundled table: every model that is not "few wide experts". Rows per expert tile, output
# columns per tile (both GEMMs), launch settings, and the load path and program order.
BLOCK_M = 64
BLOCK_N = 128
GATE_UP_WARPS, GATE_UP_STAGES = 4, 4
DOWN_WARPS, DOWN_STAGES = 4, 4
DESCRIPTORS = False
GROUPED_X = False
GROUP_M = 0

# The wide table: at most WIDE_MAX_EXPERTS experts, each at least WIDE_MIN_INTER columns wide
# (Mixtral-8x7B: 8 × 14336). Separate column blocks for the two GEMMs (gate/up keeps two fp32
# accumulators, down one). WIDE_DESCRIPTORS None: TMA descriptors where they exist (CUDA compute
# capability >= 9, and the interpreter); WIDE_GROUPED_X: copy the routed rows of x into expert
# order first (TMA needs a contiguous A operand); WIDE_GROUP_M: expert tiles per program group.
WIDE_MAX_EXPERTS = 16
WIDE_MIN_INTER = 8192
WIDE_BLOCK_M = 128
WIDE_GATE_UP_BLOCK_N = 128
WIDE_DOWN_BLOCK_N = 128
WIDE_GATE_UP_WARPS, WIDE_GATE_UP_STAGES = 8, 3
WIDE_DOWN_WARPS, WIDE_DOWN_STAGES = 8, 3
WIDE_DESCRIPTORS = False
WIDE_GROUPED_X = True
WIDE_GROUP_M = 8

# What `nodice evolve moe --agent knobs` searches (docs/search.md): both tables' tile heights and
# column blocks, launch settings, load paths and program order. None changes a token's sums (a
# tile holds rows of one expert, a row's K walk is BLOCK_K from the shapes: not a knob).
KNOBS = {
    "BLOCK_M": (32, 64, 128),
    "BLOCK_N": (64, 128, 256),
    "GATE_UP_WARPS": (4, 8),
    "GATE_UP_STAGES": (3, 4, 5),
    "DOWN_WARPS": (4, 8),
    "DOWN_STAGES": (3, 4, 5),
    "DESCRIPTORS": (False, True),
    "GROUPED_X": (False, True),
    "GROUP_M": (0, 4, 8),
    "WIDE_BLOCK_M": (64, 128),
    "WIDE_GATE_UP_BLOCK_N": (64, 128, 256),
    "WIDE_DOWN_BLOCK_N": (64, 128, 256),
    "WIDE_GATE_UP_WARPS": (4, 8),
    "WIDE_GATE_UP_STAGES": (2, 3, 4),
    "WIDE_DOWN_WARPS": (4, 8),
    "WIDE_DOWN_STAGES": (2, 3, 4),
    "WIDE_DESCRIPTORS": (False, True),
    "WIDE_GROUPED_X": (False, True),
    "WIDE_GROUP_M": (0, 4, 8),
}

# The largest reduction step (the actual one comes from the weights' shapes).
MAX_BLOCK_K = 64
# Shared memory the operand pipeline may take (a few KB of the H200's 227 KB per block are left
# to the epilogue): 4-byte elements get fewer stages, never other tiles.
PIPELINE_SMEM = 220 * 1024
# Tokens per routing / combine program, and output columns per combine program.
BLOCK_T = 16
COMBINE_COLS = 128
# Columns per program of the row copy, and its warps.
GATHER_COLS = 128
GATHER_WARPS = 8
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
def _tile_order(pid, n_tiles, n_cols, GROUP_M: tl.constexpr):
    # (expert tile, column block) of program pid. Only the order in which tiles run changes.
    if GROUP_M == 0:
        tile = pid % n_tiles
        col_block = pid // n_tiles
    else:
        per_group = GROUP_M * n_cols
        first = (pid // per_group) * GROUP_M
        group_tiles = tl.minimum(n_tiles - first, GROUP_M)
        tile = first + (pid % per_group) % group_tiles
        col_block = (pid % per_group) // group_tiles
    return tile, col_block


@triton.jit
def _gather_rows(
    x_ptr,
    row_pair_ptr,
    tile_expert_ptr,
    xg_ptr,
    hidden,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    # The grouped rows' tokens, copied in expert order; padding rows are zeros.
    tile = tl.program_id(0)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        pair = tl.load(row_pair_ptr + rows)
        row_ok = pair >= 0
        token = tl.where(row_ok, pair // TOP_K, 0)
        cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
        col_ok = cols < hidden
        v = tl.load(
            x_ptr + token.to(tl.int64)[:, None] * hidden + cols[None, :],
            mask=row_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        tl.store(xg_ptr + rows.to(tl.int64)[:, None] * hidden + cols[None, :], v, mask=col_ok[None, :])


@triton.jit
def _gate_up_swiglu(
    x_ptr,
    w_ptr,
    row_pair_ptr,
    tile_expert_ptr,
    act_ptr,
    n_tiles,
    hidden,
    inter,
    TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    GROUPED_X: tl.constexpr,
    DESCRIPTORS: tl.constexpr,
):
    # x_ptr: the tokens [T, H], or (GROUPED_X) their rows already in expert order [n_tiles·BLOCK_M, H].
    tile, col_block = _tile_order(tl.program_id(0), n_tiles, tl.cdiv(inter, BLOCK_N), GROUP_M)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        row0 = tile * BLOCK_M
        col0 = col_block * BLOCK_N
        rows = row0 + tl.arange(0, BLOCK_M)
        cols = col0 + tl.arange(0, BLOCK_N)
        col_ok = cols < inter
        ks = tl.arange(0, BLOCK_K)
        if GROUPED_X:
            a_ptrs = x_ptr + rows[:, None] * hidden + ks[None, :]
            a_mask = rows[:, None] >= 0
        else:
            pair = tl.load(row_pair_ptr + rows)
            row_ok = pair >= 0
            token = tl.where(row_ok, pair // TOP_K, 0)
            a_ptrs = x_ptr + token[:, None] * hidden + ks[None, :]
            a_mask = row_ok[:, None]
        acc_gate = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        acc_up = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        if DESCRIPTORS:
            # This expert's gate and up halves, [I, H] each: columns past I read zeros.
            gate_base = w_ptr + expert.to(tl.int64) * 2 * inter * hidden
            gate_desc = tl.make_tensor_descriptor(gate_base, [inter, hidden], [hidden, 1], [BLOCK_N, BLOCK_K])
            up_desc = tl.make_tensor_descriptor(
                gate_base + inter * hidden, [inter, hidden], [hidden, 1], [BLOCK_N, BLOCK_K]
            )
            act_desc = tl.make_tensor_descriptor(
                act_ptr, [n_tiles * BLOCK_M, inter], [inter, 1], [BLOCK_M, BLOCK_N]
            )
            if GROUPED_X:
                a_desc = tl.make_tensor_descriptor(
                    x_ptr, [n_tiles * BLOCK_M, hidden], [hidden, 1], [BLOCK_M, BLOCK_K]
                )
            for k in range(0, hidden, BLOCK_K):
                if GROUPED_X:
                    a = a_desc.load([row0, k])
                else:
                    a = tl.load(a_ptrs, mask=a_mask, other=0.0)
                    a_ptrs += BLOCK_K
                acc_gate = tl.dot(a, gate_desc.load([col0, k]).T, acc_gate)
                acc_up = tl.dot(a, up_desc.load([col0, k]).T, acc_up)
            act = acc_gate / (1.0 + tl.exp(-acc_gate)) * acc_up
            act_desc.store([row0, col0], act.to(act_desc.dtype))
        else:
            # BLOCK_K divides H, so only the rows (padding) and columns (tail) need masks.
            gate_ptrs = (
                w_ptr + expert.to(tl.int64) * 2 * inter * hidden + cols[None, :] * hidden + ks[:, None]
            )
            up_ptrs = gate_ptrs + inter * hidden
            w_mask = col_ok[None, :]
            for _ in range(0, hidden, BLOCK_K):
                a = tl.load(a_ptrs, mask=a_mask, other=0.0)
                acc_gate = tl.dot(a, tl.load(gate_ptrs, mask=w_mask, other=0.0), acc_gate)
                acc_up = tl.dot(a, tl.load(up_ptrs, mask=w_mask, other=0.0), acc_up)
                a_ptrs += BLOCK_K
                gate_ptrs += BLOCK_K
                up_ptrs += BLOCK_K
            act = acc_gate / (1.0 + tl.exp(-acc_gate)) * acc_up
            tl.store(
                act_ptr + rows[:, None] * inter + cols[None, :],
                act.to(act_ptr.dtype.element_ty),
                mask=w_mask,
            )


@triton.jit
def _down(
    act_ptr,
    w_ptr,
    tile_expert_ptr,
    out_ptr,
    n_tiles,
    hidden,
    inter,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DESCRIPTORS: tl.constexpr,
):
    tile, col_block = _tile_order(tl.program_id(0), n_tiles, tl.cdiv(hidden, BLOCK_N), GROUP_M)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        row0 = tile * BLOCK_M
        col0 = col_block * BLOCK_N
        acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        if DESCRIPTORS:
            # The activations are grouped already; this expert's [H, I] down matrix.
            a_desc = tl.make_tensor_descriptor(
                act_ptr, [n_tiles * BLOCK_M, inter], [inter, 1], [BLOCK_M, BLOCK_K]
            )
            w_desc = tl.make_tensor_descriptor(
                w_ptr + expert.to(tl.int64) * hidden * inter, [hidden, inter], [inter, 1], [BLOCK_N, BLOCK_K]
            )
            out_desc = tl.make_tensor_descriptor(
                out_ptr, [n_tiles * BLOCK_M, hidden], [hidden, 1], [BLOCK_M, BLOCK_N]
            )
            for k in range(0, inter, BLOCK_K):
                acc = tl.dot(a_desc.load([row0, k]), w_desc.load([col0, k]).T, acc)
            out_desc.store([row0, col0], acc.to(out_desc.dtype))
        else:
            rows = row0 + tl.arange(0, BLOCK_M)
            cols = col0 + tl.arange(0, BLOCK_N)
            col_ok = cols < hidden
            ks = tl.arange(0, BLOCK_K)
            a_ptrs = act_ptr + rows[:, None] * inter + ks[None, :]
            w_ptrs = w_ptr + expert.to(tl.int64) * hidden * inter + cols[None, :] * inter + ks[:, None]
            w_mask = col_ok[None, :]
            for _ in range(0, inter, BLOCK_K):
                acc = tl.dot(tl.load(a_ptrs), tl.load(w_ptrs, mask=w_mask, other=0.0), acc)
                a_ptrs += BLOCK_K
                w_ptrs += BLOCK_K
            tl.store(
                out_ptr + rows[:, None] * hidden + cols[None, :],
                acc.to(out_ptr.dtype.element_ty),
                mask=w_mask,
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
    for the GPU.
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


def is_wide(n_experts: int, top_k: int, hidden: int, inter: int) -> bool:
    """Few wide experts: the wide table (a property of the model, not of the batch)."""
    return n_experts <= WIDE_MAX_EXPERTS and inter >= WIDE_MIN_INTER


def _stages(stages: int, bytes_per_stage: int) -> int:
    """The pinned pipeline depth, or fewer where one stage's operands would not fit (4-byte elements)."""
    return max(1, min(stages, PIPELINE_SMEM // bytes_per_stage))


def _descriptor_scratch(size: int, alignment: int, stream):
    """Global memory where device-side TMA descriptors are written before use (128 bytes each)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _descriptors_usable(*tensors: torch.Tensor) -> bool:
    """TMA exists (compute capability 9+, or the interpreter, which emulates it) and the weights sit
    where it can address them (16-byte aligned starts; the row strides are multiples of 16 elements)."""
    device = tensors[0].device
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        return False
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in tensors)


def tile_config(n_experts: int, top_k: int, hidden: int, inter: int):
    """(BLOCK_M, gate/up (BLOCK_N, warps, stages), down (BLOCK_N, warps, stages), GROUP_M,
    descriptors (None: where usable), copy x into expert order) of a model."""
    if is_wide(n_experts, top_k, hidden, inter):
        return (
            WIDE_BLOCK_M,
            (WIDE_GATE_UP_BLOCK_N, WIDE_GATE_UP_WARPS, WIDE_GATE_UP_STAGES),
            (WIDE_DOWN_BLOCK_N, WIDE_DOWN_WARPS, WIDE_DOWN_STAGES),
            WIDE_GROUP_M,
            WIDE_DESCRIPTORS,
            WIDE_GROUPED_X,
        )
    return (
        BLOCK_M,
        (BLOCK_N, GATE_UP_WARPS, GATE_UP_STAGES),
        (BLOCK_N, DOWN_WARPS, DOWN_STAGES),
        GROUP_M,
        DESCRIPTORS,
        GROUPED_X,
    )


def kernel(x, router_logits, w_gate_up, w_down, top_k):
    n_tokens, hidden = x.shape
    n_experts, inter = w_down.shape[0], w_down.shape[2]
    # The reduction step depends on the weights' shapes only: the largest power of two
    # (up to MAX_BLOCK_K) dividing both H and I, so no K tail needs masking.
    block_k = min(MAX_BLOCK_K, (hidden & -hidden), (inter & -inter))
    if block_k < 16:
        raise ValueError(f"H={hidden} and I={inter} must be multiples of 16 (tensor-core tiles)")
    block_m, gate_up, down, group_m, descriptors, grouped_x = tile_config(n_experts, top_k, hidden, inter)
    if descriptors is None:
        descriptors = True
    descriptors = bool(descriptors) and _descriptors_usable(w_gate_up, w_down)
    if descriptors and x.is_cuda:
        # Set on every call: the allocator lives in a context variable, which a worker thread
        # would not inherit from the importing one.
        triton.set_allocator(_descriptor_scratch)
    size = x.element_size()
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
    row_pair, tile_expert, pair_row = group_by_expert(ids, n_experts, block_m)
    n_tiles = tile_expert.numel()
    n_rows = n_tiles * block_m
    a = x
    if grouped_x:
        a = torch.empty((n_rows, hidden), dtype=x.dtype, device=x.device)
        _gather_rows[(n_tiles, triton.cdiv(hidden, GATHER_COLS))](
            x,
            row_pair,
            tile_expert,
            a,
            hidden,
            TOP_K=top_k,
            BLOCK_M=block_m,
            BLOCK_H=GATHER_COLS,
            num_warps=GATHER_WARPS,
        )
    act = torch.empty((n_rows, inter), dtype=x.dtype, device=x.device)
    gate_up_n, gate_up_warps, gate_up_stages = gate_up
    _gate_up_swiglu[(n_tiles * triton.cdiv(inter, gate_up_n),)](
        a,
        w_gate_up,
        row_pair,
        tile_expert,
        act,
        n_tiles,
        hidden,
        inter,
        TOP_K=top_k,
        BLOCK_M=block_m,
        BLOCK_N=gate_up_n,
        BLOCK_K=block_k,
        GROUP_M=group_m,
        GROUPED_X=bool(grouped_x),
        DESCRIPTORS=descriptors,
        num_warps=gate_up_warps,
        num_stages=_stages(gate_up_stages, (block_m + 2 * gate_up_n) * block_k * size),
    )
    out = torch.empty((n_rows, hidden), dtype=x.dtype, device=x.device)
    down_n, down_warps, down_stages = down
    _down[(n_tiles * triton.cdiv(hidden, down_n),)](
        act,
        w_down,
        tile_expert,
        out,
        n_tiles,
        hidden,
        inter,
        BLOCK_M=block_m,
        BLOCK_N=down_n,
        BLOCK_K=block_k,
        GROUP_M=group_m,
        DESCRIPTORS=descriptors,
        num_warps=down_warps,
        num_stages=_stages(down_stages, (block_m + down_n) * block_k * size),
    )
    y = torch.empty_like(x)
    _combine[(triton.cdiv(n_tokens, BLOCK_T), triton.cdiv(hidden, COMBINE_COLS))](
        out,
        pair_row,
        weights,
        y,
        n_tokens,
        hidden,
        TOP_K=top_k,
        BLOCK_T=BLOCK_T,
        BLOCK_N=COMBINE_COLS,
    )
    return y
