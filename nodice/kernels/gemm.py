"""GEMM: tiles chosen per number of rows, K walked in fixed 64-wide steps from the first block to
the last for every M; TMA loads, one program per output tile.

``c[M, N] = a[M, K] @ b[K, N]`` in bf16 with fp32 accumulation, one program per output tile,
tiles in grouped order (``GROUP_M`` row tiles share ``b``'s column tiles in L2).

Why a table on M, and why it stays batch-invariant. The seed pins 128 × 128 tiles for every M,
which costs it most at decode sizes: at M = 64 half of every MMA is padding, and a 4096-column
layer has 32 tiles for 132 SMs, so most of the GPU idles while a few SMs stream the weight. A
tile table keyed on M fixes that, and it is safe here because of *which* sizes it changes:

- ``BLOCK_M`` and ``BLOCK_N`` tile the output, not the reduction. An output element is
  ``Σ_k a[m, k]·b[k, n]``; whatever tile it falls in, and wherever in that tile, it is
  accumulated in one fp32 accumulator over the same K blocks in the same order.
- ``BLOCK_K`` = 64 is pinned for every M: each K block is the same four 16-deep MMA steps.
- ``BLOCK_M`` ≥ 64 everywhere, so every tile runs on Hopper's warp-group MMA (wgmma); a
  smaller tile would move the computation to a different instruction (``mma.sync``).
- ``num_warps`` and ``num_stages`` decide how many warp groups share a tile and how deep the
  loads are pipelined, not what is added to what.
- No float atomics, no stream-K, and as shipped no split-K. With the ``CHAINED_SPLITS`` pin on
  (off as shipped), a tile's K walk may be cut into segments run by successive programs, but each
  one continues the previous one's fp32 running sum with the same MMAs in the same order (an
  integer flag says when that sum is ready), so the element's sum is still the one-program sum.
  With the ``SPLIT_K`` pin on (off as shipped), every product sums fixed K segments (from K
  alone) in segment order; whether a segment runs as its own program (small M) or inside its
  tile's program (large M) changes where the additions happen, never which ones.

The rules below were read off a sweep of every tile over every workload on the H200 (results in
``lab/results/gemm_h200_2026-12-02/``; the sweep is now the knob search, ``KNOBS`` and
``ORDER_KNOBS`` below); the hand-written version is ``lab/candidates/gemm_tiles.py``.

The static stage reads the table as what it is (tiles of non-reduction axes); the dynamic stage
on the GPU checks the claim bitwise with row counts on both sides of every bucket edge.
"""

import torch
import triton
import triton.language as tl

# The K tile, pinned for every shape: the only tile size that shapes the reduction.
BLOCK_K = 64

# Loads through TMA descriptors (for every M unless SINGLE_POINTER_LOADS below is on).
USE_TMA = 1

# Decode sizes stream the weight: a tile is 64 rows (the smallest warp-group MMA) by a column
# block chosen from the layer's width N, so that enough column tiles read the weight at once;
# narrower tiles pipeline deeper. Each tile is (BLOCK_N, num_stages); a layer takes the first
# one it has at least the named number of column tiles for.
# One request's step (M ≤ 16): wide layers 256 columns, the rest 128.
SINGLE_MAX_M = 16
SINGLE_WIDE_MIN_TILES = 96
SINGLE_WIDE_BLOCK_N, SINGLE_WIDE_STAGES = 256, 4
SINGLE_BLOCK_N, SINGLE_STAGES = 128, 6
# One request's step through pointer loads instead of TMA (1: on; 0: TMA like every other M). The
# sweep of 2026-12-02 timed 64-row tiles with pointer loads faster than any TMA tile at M = 1 on six
# of the seven layers (Llama-3-8B QKV 0.99× cuBLAS against 0.86× for the rules below, down 0.81×
# against 0.62×; lab/results/gemm_h200_2026-12-02/sweep_gemm_round2.jsonl): TMA still moves 64
# rows of `a` per block where pointer loads skip the masked rows. The same tile, K walk and MMAs
# read the same values either way, so the output does not change with the load path; the gate
# settles the choice by running both sides. On since the pin sweep of 2026-12-04 timed these rules
# against TMA on all 35 report shapes in one run: geomean 0.927 -> 0.932x cuBLAS, lowest row 0.63 ->
# 0.73x (Llama-3-8B down, M = 1: 0.64 -> 0.78x), bits identical to TMA's on all four layer shapes
# (lab/results/h200_2026-12-04/callJ/gemm_pins/; the sweep is now the knob search). The tile is
# the widest of three that leaves at least SINGLE_PTR_MIN_TILES column tiles.
SINGLE_POINTER_LOADS = 1
SINGLE_PTR_MIN_TILES = 80
SINGLE_PTR_WIDE_BLOCK_N, SINGLE_PTR_WIDE_STAGES = 128, 6
SINGLE_PTR_MID_BLOCK_N, SINGLE_PTR_MID_STAGES = 64, 8
SINGLE_PTR_NARROW_BLOCK_N, SINGLE_PTR_NARROW_STAGES = 32, 8
# 16 columns where the 32-column tile leaves fewer than SINGLE_PTR_NARROWEST_MIN_TILES column tiles
# (0: off, 32 columns are the last resort, as timed). Nsight Compute on the H200 (2026-12-04,
# lab/results/h200_2026-12-04/callO/) found the M = 1 product of a long-K layer on 80 programs,
# one per SM (128 KB of shared memory each), 52 SMs idle and DRAM at 60 % where cuBLAS's split-K
# reaches 89 %: 16-column tiles, 10 KB a stage, give two or three programs to every SM with the
# same K walk and MMAs per output column, so the same bits. Off until a sweep times it.
SINGLE_PTR_NARROWEST_MIN_TILES = 0
SINGLE_PTR_NARROWEST_BLOCK_N, SINGLE_PTR_NARROWEST_STAGES = 16, 8
# A batch of decode steps (16 < M <= 64) through the same pointer-load tiles (1) instead of the TMA
# tiles below (0, as timed): the TMA rules leave Llama-3-8B's o projection 64 column tiles at M = 64
# (0.84x cuBLAS in the report). Same K walk and MMAs, so the same bits. Off until a sweep times it.
DECODE_POINTER_LOADS = 0
# A batch of decode steps (M ≤ 64): 256, 128 or 64 columns.
DECODE_MAX_M = 64
DECODE_WIDE_MIN_TILES, DECODE_MID_MIN_TILES = 96, 80
DECODE_WIDE_BLOCK_N, DECODE_WIDE_STAGES = 256, 4
DECODE_MID_BLOCK_N, DECODE_MID_STAGES = 128, 6
DECODE_BLOCK_N, DECODE_STAGES = 64, 8
DECODE_BLOCK_M, DECODE_WARPS = 64, 4

# Larger M is compute-bound. Two tiles, and the one whose waves over the SMs cost less wins:
# ceil(tiles / SMs) × (rows × columns of a tile) / (its MMA efficiency relative to the wide
# tile, measured at prefill sizes, in per cent).
WIDE_BLOCK_M, WIDE_BLOCK_N, WIDE_WARPS, WIDE_STAGES = 128, 256, 8, 4
NARROW_BLOCK_M, NARROW_BLOCK_N, NARROW_WARPS, NARROW_STAGES = 128, 128, 4, 5
NARROW_EFFICIENCY_PERCENT = 92
# A third tile for the compute-bound sizes (1: on; 0: off, until a search times it): one warp group's
# 64 rows, so that a product whose 128-row tiles leave SMs idle in their last wave runs more, smaller
# programs (M = 512 of Qwen3-32B's down layer: 80 wide tiles for 132 SMs; 0.76x cuBLAS on the H200,
# 0.76x on an H100). It enters the waves × area rule at MID_EFFICIENCY_PERCENT of the wide tile's
# MMA efficiency. The rows of a tile never shape a row's sum (the same K walk and MMAs), so the
# same bits whichever tile runs. The knob search over these four knobs alone on an H100 (2026-12-07,
# lab/results/h100_2026-12-07c/) found the same bits in every setting and a slower row wherever the
# rule picks the tile (Qwen3-32B down at M = 512: 0.57-0.64x against 0.80x): off.
MID_TILES = 0
MID_BLOCK_M, MID_BLOCK_N, MID_WARPS, MID_STAGES = 64, 256, 4, 4
MID_EFFICIENCY_PERCENT = 80
GROUP_M = 8
# Streaming multiprocessors, for the wave count (the H200's; the device's own where CUDA is).
SMS = 132

# Chained K segments for the compute-bound sizes (1: on; 0: off). A tile's K walk is cut into
# segments of at most CHAINED_SEG_K (whole K blocks; from K alone), one program each: the program
# of segment s waits until segment s - 1 of its tile has stored its fp32 running sum, loads it as
# its accumulator and goes on with the same MMAs over its own K blocks, so the tile's sum is the
# one-program sum, step for step, whatever the segments (no split-K combine, no atomics on
# floats). It turns one wave of few large programs into several waves of smaller ones where tiles
# leave SMs idle (M = 512: 96 or 160 tiles on 132 SMs). Chosen with the tile, by waves × tile
# area / efficiency, charged CHAINED_COST_PERCENT for the extra partial round trips and pipeline
# ramps. The segment is the grid's second axis, so a segment's predecessor is always dispatched
# first (blocks go out first axis fastest): the wait cannot block the predecessor.
CHAINED_SPLITS = 0
CHAINED_SEG_K = 2048
CHAINED_COST_PERCENT = 10

# Split-K in fixed K segments summed in a fixed order (1: on; 0: off, until a sweep times it). Every
# product's K walk is cut into segments of SPLIT_SEG_K (whole K blocks; from K alone); a segment is
# the fp32 sum of its own K blocks from zero, and the output is ((0 + s_0) + s_1) + … in segment
# order. Up to SPLIT_MAX_M rows each segment is its own program (the grid's second axis) and a
# second kernel adds the segments' sums in order: a decode-size product then has `segments` times
# more programs where its tiles leave SMs idle (Nsight Compute on the H200: M = 1 of a long-K layer
# on 80 programs, 52 SMs idle, DRAM at 60 % where cuBLAS's split-K reaches 89 %). Above, one program
# walks its tile's segments one after another and adds them in the same order. The same MMAs from
# zero per segment and the same additions of the segments: the same bits at every M. The shipped
# sum (one fp32 running sum over K) is another one, so the pin changes the kernel's bits for every
# product, and the chained segments above (a running sum) are never read while it is on.
SPLIT_K = 0
SPLIT_SEG_K = 2048
SPLIT_MAX_M = 64

# The knobs `nodice evolve gemm --agent knobs` may set (docs/search.md): the decode sizes' load path
# and column tiles, and the chained K segments (each continues its predecessor's fp32 running sum:
# the one-program sum, step for step; the H200 sweep of 2026-12-04 found the same bits on every
# layer), which choose how a product is walked and never a bit of it (the search checks each
# setting bitwise against the best version before timing it). BLOCK_K sets the sum's steps: not a
# knob.
KNOBS = {
    "SINGLE_POINTER_LOADS": (0, 1),
    "SINGLE_PTR_MIN_TILES": (64, 80, 128, 256, 396),
    "SINGLE_PTR_NARROWEST_MIN_TILES": (0, 128, 256, 264, 396),
    "SINGLE_PTR_NARROWEST_STAGES": (4, 6, 8),
    "DECODE_POINTER_LOADS": (0, 1),
    "DECODE_STAGES": (4, 6, 8),
    "CHAINED_SPLITS": (0, 1),
    "CHAINED_SEG_K": (1024, 2048, 4096),
    "CHAINED_COST_PERCENT": (0, 10, 25, 50),
    "SPLIT_MAX_M": (16, 64),
    "MID_TILES": (0, 1),
    "MID_BLOCK_N": (128, 256),
    "MID_STAGES": (3, 4),
    "MID_EFFICIENCY_PERCENT": (60, 70, 80, 90, 100),
}
# Knobs that change the sum (another fixed order of the same terms): the split-K segments. A setting
# that moves one is judged by the whole gate, not bit for bit against the best version. SPLIT_MAX_M
# only moves the segments between programs (the same bits) but matters only with SPLIT_K on.
ORDER_KNOBS = {
    "SPLIT_K": (0, 1),
    "SPLIT_SEG_K": (1024, 2048, 4096),
}
# Knobs the host code reads only under another knob's values: a setting that differs from another
# only in a knob left unread is the same kernel, and the search proposes it once.
KNOB_WHEN = {
    "SINGLE_PTR_MIN_TILES": {"SINGLE_POINTER_LOADS": (1,)},
    "SINGLE_PTR_NARROWEST_MIN_TILES": {"SINGLE_POINTER_LOADS": (1,)},
    "SINGLE_PTR_NARROWEST_STAGES": {"SINGLE_PTR_NARROWEST_MIN_TILES": (128, 256, 264, 396)},
    "DECODE_POINTER_LOADS": {"SINGLE_POINTER_LOADS": (1,)},
    "CHAINED_SEG_K": {"CHAINED_SPLITS": (1,)},
    "CHAINED_COST_PERCENT": {"CHAINED_SPLITS": (1,)},
    "SPLIT_SEG_K": {"SPLIT_K": (1,)},
    "SPLIT_MAX_M": {"SPLIT_K": (1,)},
    # With split-K on, every product is a split (or one segment: the one-pass sum), never chained.
    "CHAINED_SPLITS": {"SPLIT_K": (0,)},
    "MID_BLOCK_N": {"MID_TILES": (1,)},
    "MID_STAGES": {"MID_TILES": (1,)},
    "MID_EFFICIENCY_PERCENT": {"MID_TILES": (1,)},
}


def _sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return SMS


def _pointer_loads(m: int) -> bool:
    """Whether an M-row product reads through pointer loads rather than TMA descriptors."""
    return not USE_TMA or _pointer_tiles(m)


def _pointer_tiles(m: int) -> bool:
    """Whether an M-row product takes the pointer-load tile rules (one request's step, and with
    DECODE_POINTER_LOADS a batch of decode steps)."""
    return bool(SINGLE_POINTER_LOADS and (m <= SINGLE_MAX_M or (DECODE_POINTER_LOADS and m <= DECODE_MAX_M)))


def _tile(m: int, n: int, sms: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, GROUP_M, num_warps, num_stages) for an M × N output."""
    if _pointer_tiles(m):
        for block_n, stages in (
            (SINGLE_PTR_WIDE_BLOCK_N, SINGLE_PTR_WIDE_STAGES),
            (SINGLE_PTR_MID_BLOCK_N, SINGLE_PTR_MID_STAGES),
        ):
            if triton.cdiv(n, block_n) >= SINGLE_PTR_MIN_TILES:
                return DECODE_BLOCK_M, block_n, GROUP_M, DECODE_WARPS, stages
        if triton.cdiv(n, SINGLE_PTR_NARROW_BLOCK_N) < SINGLE_PTR_NARROWEST_MIN_TILES:
            return (
                DECODE_BLOCK_M,
                SINGLE_PTR_NARROWEST_BLOCK_N,
                GROUP_M,
                DECODE_WARPS,
                SINGLE_PTR_NARROWEST_STAGES,
            )
        return DECODE_BLOCK_M, SINGLE_PTR_NARROW_BLOCK_N, GROUP_M, DECODE_WARPS, SINGLE_PTR_NARROW_STAGES
    if m <= SINGLE_MAX_M:
        if triton.cdiv(n, SINGLE_WIDE_BLOCK_N) >= SINGLE_WIDE_MIN_TILES:
            return DECODE_BLOCK_M, SINGLE_WIDE_BLOCK_N, GROUP_M, DECODE_WARPS, SINGLE_WIDE_STAGES
        return DECODE_BLOCK_M, SINGLE_BLOCK_N, GROUP_M, DECODE_WARPS, SINGLE_STAGES
    if m <= DECODE_MAX_M:
        if triton.cdiv(n, DECODE_WIDE_BLOCK_N) >= DECODE_WIDE_MIN_TILES:
            return DECODE_BLOCK_M, DECODE_WIDE_BLOCK_N, GROUP_M, DECODE_WARPS, DECODE_WIDE_STAGES
        if triton.cdiv(n, DECODE_MID_BLOCK_N) >= DECODE_MID_MIN_TILES:
            return DECODE_BLOCK_M, DECODE_MID_BLOCK_N, GROUP_M, DECODE_WARPS, DECODE_MID_STAGES
        return DECODE_BLOCK_M, DECODE_BLOCK_N, GROUP_M, DECODE_WARPS, DECODE_STAGES

    wide = (
        triton.cdiv(triton.cdiv(m, WIDE_BLOCK_M) * triton.cdiv(n, WIDE_BLOCK_N), sms)
        * WIDE_BLOCK_M
        * WIDE_BLOCK_N
    )
    narrow = (
        triton.cdiv(triton.cdiv(m, NARROW_BLOCK_M) * triton.cdiv(n, NARROW_BLOCK_N), sms)
        * NARROW_BLOCK_M
        * NARROW_BLOCK_N
    )
    # Waves × tile area: the time of each choice, up to the tiles' efficiencies.
    if narrow * 100 < wide * NARROW_EFFICIENCY_PERCENT:
        chosen, cost, efficiency = (
            (NARROW_BLOCK_M, NARROW_BLOCK_N, GROUP_M, NARROW_WARPS, NARROW_STAGES),
            narrow,
            NARROW_EFFICIENCY_PERCENT,
        )
    else:
        chosen, cost, efficiency = (WIDE_BLOCK_M, WIDE_BLOCK_N, GROUP_M, WIDE_WARPS, WIDE_STAGES), wide, 100
    if MID_TILES:
        mid = (
            triton.cdiv(triton.cdiv(m, MID_BLOCK_M) * triton.cdiv(n, MID_BLOCK_N), sms)
            * MID_BLOCK_M
            * MID_BLOCK_N
        )
        if mid * efficiency < cost * MID_EFFICIENCY_PERCENT:
            return MID_BLOCK_M, MID_BLOCK_N, GROUP_M, MID_WARPS, MID_STAGES
    return chosen


def _split_segments(k: int) -> int:
    """The number of fixed K segments every product sums in order with SPLIT_K on (from K alone)."""
    return triton.cdiv(k, SPLIT_SEG_K) if SPLIT_K else 1


def _segments(k: int) -> int:
    """The number of chained K segments a layer's K walk is cut into (from K alone)."""
    return triton.cdiv(k, CHAINED_SEG_K) if CHAINED_SPLITS else 1


def _compute_tile(m: int, n: int, segments: int, sms: int) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, GROUP_M, num_warps, num_stages, segments used) for M > DECODE_MAX_M when
    the chain is on: the wide or narrow tile, each walked in one program or in ``segments``
    chained ones, whichever costs the fewest waves × tile area (per cent of the wide tile's
    efficiency, and of the chain's overhead). With one segment it decides as ``_tile`` does."""
    best: tuple[int, tuple[int, int, int, int, int, int]] | None = None
    tiles_ = [
        (WIDE_BLOCK_M, WIDE_BLOCK_N, WIDE_WARPS, WIDE_STAGES, 100),
        (NARROW_BLOCK_M, NARROW_BLOCK_N, NARROW_WARPS, NARROW_STAGES, NARROW_EFFICIENCY_PERCENT),
    ]
    if MID_TILES:
        tiles_.append((MID_BLOCK_M, MID_BLOCK_N, MID_WARPS, MID_STAGES, MID_EFFICIENCY_PERCENT))
    for bm, bn, warps, stages, efficiency in tiles_:
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        for s in (1, segments) if segments > 1 else (1,):
            overhead = 100 + (CHAINED_COST_PERCENT if s > 1 else 0)
            # Waves of the s-fold grid, each 1/s of a tile's work; scaled to compare in integers.
            cost = triton.cdiv(tiles * s, sms) * bm * bn * overhead * 10000 // (s * efficiency)
            if best is None or cost < best[0]:
                best = (cost, (bm, bn, GROUP_M, warps, stages, s))
    assert best is not None
    return best[1]


@triton.jit
def _tile_ids(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped launch order: changes which tile runs when, never how a tile is computed.
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    first_m = (pid // tiles_per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_per_group) % group_rows
    pid_n = (pid % tiles_per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def _matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    part_ptr=None,
    SEG_K=0,
    SPLIT: tl.constexpr = 0,
):
    # SPLIT 0: one fp32 running sum over K. 1: the sum of the K segments of SEG_K, in order. 2: the
    # segment program_id(1) alone, its fp32 sum stored to part_ptr[segment, M, N].
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_mask = (rows[:, None] < M) & (cols[None, :] < N)
    if SPLIT == 0:
        out = _k_blocks(
            a_ptr,
            b_ptr,
            rows,
            cols,
            M,
            N,
            K,
            0,
            K,
            stride_am,
            stride_ak,
            stride_bk,
            stride_bn,
            BLOCK_M,
            BLOCK_N,
            BLOCK_K,
            NUM_STAGES,
        )
    elif SPLIT == 1:
        out = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k_lo in range(0, K, SEG_K):
            out += _k_blocks(
                a_ptr,
                b_ptr,
                rows,
                cols,
                M,
                N,
                K,
                k_lo,
                tl.minimum(k_lo + SEG_K, K),
                stride_am,
                stride_ak,
                stride_bk,
                stride_bn,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                NUM_STAGES,
            )
    else:
        seg = tl.program_id(1)
        k_lo = seg * SEG_K
        out = _k_blocks(
            a_ptr,
            b_ptr,
            rows,
            cols,
            M,
            N,
            K,
            k_lo,
            tl.minimum(k_lo + SEG_K, K),
            stride_am,
            stride_ak,
            stride_bk,
            stride_bn,
            BLOCK_M,
            BLOCK_N,
            BLOCK_K,
            NUM_STAGES,
        )
        part = part_ptr + seg.to(tl.int64) * M * N + rows[:, None] * N + cols[None, :]
        tl.store(part, out, mask=c_mask)
    if SPLIT != 2:
        tl.store(
            c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
            out.to(c_ptr.dtype.element_ty),
            mask=c_mask,
        )


@triton.jit
def _k_blocks(
    a_ptr,
    b_ptr,
    rows,
    cols,
    M,
    N,
    K,
    k_lo,
    k_hi,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """The fp32 sum of a tile's K blocks in [k_lo, k_hi), from zero, in K order (pointer loads)."""
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in tl.range(k_lo, k_hi, BLOCK_K, num_stages=NUM_STAGES):
        a_mask = (rows[:, None] < M) & (k + ks[None, :] < K)
        b_mask = (k + ks[:, None] < K) & (cols[None, :] < N)
        a = tl.load(a_ptr + rows[:, None] * stride_am + (k + ks[None, :]) * stride_ak, mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k + ks[:, None]) * stride_bk + cols[None, :] * stride_bn, mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _sum_segments(part_ptr, c_ptr, M, N, SEGMENTS, stride_cm, stride_cn, BLOCK: tl.constexpr):
    """``c = ((0 + part[0]) + part[1]) + …``: the segments' fp32 sums added in segment order."""
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < M * N
    out = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, SEGMENTS):
        out += tl.load(part_ptr + s * M * N + idx, mask=mask, other=0.0)
    row, col = idx // N, idx % N
    tl.store(c_ptr + row * stride_cm + col * stride_cn, out.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _matmul_tma(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SEG_K=0,
    SPLIT: tl.constexpr = 0,
):
    # The same tile and K walk through TMA: rows past M and columns past N (and K past its end)
    # read as zeros, and the store is clipped to the matrix. SPLIT 1: the K segments of SEG_K
    # summed in order, as ``_matmul`` does.
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    if SPLIT == 0:
        out = _k_blocks_tma(a_desc, b_desc, off_m, off_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES)
    else:
        out = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k_lo in range(0, K, SEG_K):
            k_hi = tl.minimum(k_lo + SEG_K, K)
            out += _k_blocks_tma(
                a_desc, b_desc, off_m, off_n, k_lo, k_hi, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES
            )
    c_desc.store([off_m, off_n], out.to(c_desc.dtype))


@triton.jit
def _k_blocks_tma(
    a_desc,
    b_desc,
    off_m,
    off_n,
    k_lo,
    k_hi,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """The fp32 sum of a tile's K blocks in [k_lo, k_hi), from zero, in K order (TMA loads)."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in tl.range(k_lo, k_hi, BLOCK_K, num_stages=NUM_STAGES):
        a = a_desc.load([off_m, k])
        b = b_desc.load([k, off_n])
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _matmul_chained(
    a_desc,
    b_desc,
    c_desc,
    part_ptr,
    flag_ptr,
    M,
    N,
    K,
    SEG_K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # Grid (tiles, segments): axis 0 is the tile, axis 1 the segment, and blocks are dispatched
    # axis 0 fastest, so every program of segment s - 1 starts before any of segment s. Segment s
    # walks K blocks [s * SEG_K, (s + 1) * SEG_K) from the running sum segment s - 1 left in the
    # workspace; the segments follow K alone.
    tile = tl.program_id(0)
    seg = tl.program_id(1)
    pid_m, pid_n = _tile_ids(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    part = part_ptr + tile.to(tl.int64) * (BLOCK_M * BLOCK_N) + rows[:, None] * BLOCK_N + cols[None, :]
    k_lo = seg * SEG_K
    k_hi = tl.minimum(k_lo + SEG_K, K)
    if seg == 0:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    else:
        # The previous segment's release of the flag orders its stores before this acquire; the
        # sum is read from L2 (``.cg``: another SM wrote it).
        while tl.atomic_add(flag_ptr + tile, 0, sem="acquire", scope="gpu") < seg:
            pass
        acc = tl.load(part, cache_modifier=".cg")
    for k in tl.range(k_lo, k_hi, BLOCK_K, num_stages=NUM_STAGES):
        a = a_desc.load([off_m, k])
        b = b_desc.load([k, off_n])
        acc = tl.dot(a, b, acc)
    if k_hi >= K:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
    else:
        tl.store(part, acc)
        # Every thread's stores come before the one thread's release.
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr + tile, seg + 1, sem="release", scope="gpu")


def _tma_ok(*tensors: torch.Tensor) -> bool:
    # TMA needs a unit inner stride and 16-byte aligned outer strides and base addresses.
    return all(
        t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0
        for t in tensors
    )


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0:
        return c
    sms = _sms(a.device)
    block_m, block_n, group_m, warps, stages = _tile(m, n, sms)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    if SPLIT_K:
        # One segment is the one-pass sum (0 + s_0 = s_0); the chained segments stay unread.
        if _split_segments(k) > 1:
            return _split(a, b, c, block_m, block_n, group_m, warps, stages, grid)
        return _launch(a, b, c, grid, (block_m, block_n, group_m, warps, stages))
    # The chain's segment length follows K alone; whether a product is chained follows its waves.
    segments = _segments(k)
    seg_k = triton.cdiv(triton.cdiv(k, BLOCK_K), segments) * BLOCK_K
    if CHAINED_SPLITS and m > DECODE_MAX_M and segments > 1 and _tma_ok(a, b, c):
        block_m, block_n, group_m, warps, stages, used = _compute_tile(m, n, segments, sms)
        if used > 1:
            return _chained(a, b, c, seg_k, block_m, block_n, group_m, warps, stages)
    return _launch(a, b, c, grid, (block_m, block_n, group_m, warps, stages))


def _launch(a, b, c, grid, tile, **split):  # type: ignore[no-untyped-def]
    """``_matmul_tma`` (where the M rule and the operands allow it) or ``_matmul`` on ``grid`` with the
    tile ``(BLOCK_M, BLOCK_N, GROUP_M, num_warps, num_stages)``; ``split``: the kernels' SPLIT
    arguments (``SEG_K``, ``SPLIT``; with ``part_ptr``, segments stored apart: the pointer kernel)."""
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, group_m, warps, stages = tile
    meta = dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K, GROUP_M=group_m, NUM_STAGES=stages)
    if "part_ptr" not in split and not _pointer_loads(m) and _tma_ok(a, b, c):
        from triton.tools.tensor_descriptor import TensorDescriptor

        _matmul_tma[grid](
            TensorDescriptor.from_tensor(a, [block_m, BLOCK_K]),
            TensorDescriptor.from_tensor(b, [BLOCK_K, block_n]),
            TensorDescriptor.from_tensor(c, [block_m, block_n]),
            m,
            n,
            k,
            **meta,
            **split,
            num_warps=warps,
        )
        return c
    _matmul[grid](
        a,
        b,
        c,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        **meta,
        **split,
        num_warps=warps,
    )
    return c


def _chained(a, b, c, seg_k, block_m, block_n, group_m, warps, stages):  # type: ignore[no-untyped-def]
    """The product in chained K segments of ``seg_k`` (``_matmul_chained``)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = b.shape[1]
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    segments = triton.cdiv(k, seg_k)
    part = torch.empty((tiles, block_m, block_n), dtype=torch.float32, device=a.device)
    flags = torch.zeros((tiles,), dtype=torch.int32, device=a.device)
    _matmul_chained[(tiles, segments)](
        TensorDescriptor.from_tensor(a, [block_m, BLOCK_K]),
        TensorDescriptor.from_tensor(b, [BLOCK_K, block_n]),
        TensorDescriptor.from_tensor(c, [block_m, block_n]),
        part,
        flags,
        m,
        n,
        k,
        seg_k,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=BLOCK_K,
        GROUP_M=group_m,
        NUM_STAGES=stages,
        num_warps=warps,
    )
    return c


def _split(a, b, c, block_m, block_n, group_m, warps, stages, grid):  # type: ignore[no-untyped-def]
    """The product as fixed K segments of SPLIT_SEG_K summed in order: each segment its own program
    up to SPLIT_MAX_M rows (then ``_sum_segments``), else inside its tile's program."""
    m, k = a.shape
    n = b.shape[1]
    segments = triton.cdiv(k, SPLIT_SEG_K)
    tile = (block_m, block_n, group_m, warps, stages)
    if m > SPLIT_MAX_M:
        return _launch(a, b, c, grid, tile, SEG_K=SPLIT_SEG_K, SPLIT=1)
    part = torch.empty((segments, m, n), dtype=torch.float32, device=a.device)
    _launch(a, b, c, (grid[0], segments), tile, part_ptr=part, SEG_K=SPLIT_SEG_K, SPLIT=2)
    block = 1024
    _sum_segments[(triton.cdiv(m * n, block),)](
        part, c, m, n, segments, c.stride(0), c.stride(1), BLOCK=block, num_warps=4
    )
    return c
