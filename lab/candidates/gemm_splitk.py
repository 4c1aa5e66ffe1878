"""GEMM candidate: the bundled kernel plus a split-K fixed per layer, for the long-K layers at
decode sizes, computed bitwise alike by a two-pass path (small M) and a one-pass path (large M).

``c[M, N] = a[M, K] @ b[K, N]`` in bf16 with fp32 accumulation.

Why split K. At M = 1 a down projection (Llama-3-8B: K = 14336, N = 4096) streams its weight
through N / BLOCK_N = 32 column tiles, a quarter of the H200's 132 SMs; the bundled kernel
(``nodice/kernels/gemm.py``) reaches 0.6-0.8x cuBLAS there, which splits K. A split count chosen
from M, the grid or the SM count would change what a row's output is the sum of with the batch;
here it is a property of the layer.

What every output element is, for every M. A layer with ``K >= SPLIT_MIN_K_OVER_N * N`` is cut
into ``S = cdiv(K, L)`` slices of ``L`` K elements, ``L`` a multiple of BLOCK_K from N alone
(``split_len``); other layers have S = 1. Then

    c[m, n] = round(((0 + p_0) + p_1) + ... + p_{S-1}),

``p_s`` the fp32 sum of slice s, accumulated from zero over its 64-wide K blocks in order (the
bundled kernel's K walk, restarted at each slice), the additions in fp32, one rounding to the
output dtype at the end. Two schedules compute exactly that:

- **partials** (M <= ``PARTIALS_MAX_M``, few output tiles): one program per (output tile, slice)
  writes ``p_s`` to an fp32 workspace ``[S, M, N]``; a second kernel adds the slices in the order
  s = 0, 1, ..., S-1 and rounds. S times as many programs stream the weight; no atomics.
- **one pass** (larger M, enough tiles): one program per output tile with two accumulators:
  ``acc`` restarts from zero at each slice boundary and is added into ``total`` after each slice.
  The same additions in the same order as the partials path, without the workspace's traffic.

Which schedule runs depends on M; what an element computes does not: the slices come from
(K, N), each slice's K blocks are the same 64-wide MMA steps in the same order into an
accumulator that starts at zero, and the slices are added in index order into a ``total`` that
starts at zero, in both. Tiles (BLOCK_M >= 64 everywhere, so every tile runs on warp-group MMA;
BLOCK_N; warps; stages) only tile the output, as in the bundled kernel. Layers with S = 1 run
the bundled kernel's computation with its tile rules (copied here: a candidate may not import
nodice), bit for bit.

Loads go through TMA descriptors where the tensors allow (the bundled kernel's rule), with the
same masked-pointer fallback; the workspace is always written and read through pointers (a
2-D descriptor over ``[S * M, N]`` would not clip a tile at the end of its slice's rows).

The pins are the module's constants below; ``sweep_gemm_splitk.py`` sets them one table at a time
(split length, partials and one-pass tiles, where the schedules meet, TMA), as ``sweep_gemm.py``
sets ``gemm_tiles.TILES``.

What the gate's static stage says. It rejects the branch on M as an algorithm choice
(``algorithm_selection_by_batch``): it counts two launches (partials, combine) against one
(one pass) and can only match launches one to one, so it cannot see that both sides add the
same slices in the same order. The claim is checked bitwise instead: under the interpreter by
``lab/tests/test_candidate_gemm_splitk.py`` and the dynamic stage (the CPU problem, K = 512 and
N = 256, splits into 4 slices), on the GPU by the sweep's own check (the gate's GPU problem,
K = N = 4096, does not split).
"""

import torch
import triton
import triton.language as tl

# The K tile, pinned for every shape and both schedules.
BLOCK_K = 64
# Loads through TMA descriptors where the tensors allow (one setting for every M).
USE_TMA = 1

# Unsplit layers: the bundled kernel's tile rules, copied (a candidate may not import nodice).
# M <= 16: 64-row tiles, 256 columns where that leaves 96 column tiles, else 128.
SINGLE_MAX_M = 16
SINGLE_WIDE_MIN_TILES = 96
SINGLE_WIDE_BLOCK_N, SINGLE_WIDE_STAGES = 256, 4
SINGLE_BLOCK_N, SINGLE_STAGES = 128, 6
# M <= 64: 64-row tiles of 256, 128 or 64 columns.
DECODE_MAX_M = 64
DECODE_WIDE_MIN_TILES, DECODE_MID_MIN_TILES = 96, 80
DECODE_WIDE_BLOCK_N, DECODE_WIDE_STAGES = 256, 4
DECODE_MID_BLOCK_N, DECODE_MID_STAGES = 128, 6
DECODE_BLOCK_N, DECODE_STAGES = 64, 8
DECODE_BLOCK_M, DECODE_WARPS = 64, 4
# Larger M: 128 x 256 or 128 x 128, whichever costs fewer waves x tile area.
WIDE_BLOCK_M, WIDE_BLOCK_N, WIDE_WARPS, WIDE_STAGES = 128, 256, 8, 4
NARROW_BLOCK_M, NARROW_BLOCK_N, NARROW_WARPS, NARROW_STAGES = 128, 128, 4, 5
NARROW_EFFICIENCY_PERCENT = 92
# Streaming multiprocessors, for the wave count (the H200's; the device's own where CUDA is).
SMS = 132

# Split a layer where K is long against N: a decode row there has few column tiles and a long
# walk for each. Every gemm workload: Llama-3-8B down (K/N = 3.5) and Qwen3-32B down (5) split;
# qkv, o, gate_up (K/N <= 1) do not.
SPLIT_MIN_K_OVER_N = 2
# Slice length: N / SPLIT_LEN_DIVISOR K elements rounded down to BLOCK_K (Llama-3-8B down: 2048,
# S = 7; Qwen3-32B down: 2560, S = 10). Tied to N, the slice count is 2K/N, and M = 1 runs
# (N / BLOCK_N) * S = 2K / BLOCK_N programs. ``SPLIT_LEN`` (K elements) pins it instead when set.
SPLIT_LEN_DIVISOR = 2
SPLIT_LEN = None

# The partials schedule up to this M; the one-pass schedule above it.
PARTIALS_MAX_M = 64
# Partials tiles: ((largest M, BLOCK_M, BLOCK_N, num_warps, num_stages), ...), first match wins.
PARTIAL_TILES = ((64, 64, 128, 4, 6), (1 << 62, 128, 128, 4, 4))
# One-pass tile: (BLOCK_M, BLOCK_N, num_warps, num_stages). Two fp32 accumulators: 128 x 128 over
# 8 warps is 64 + 64 registers a thread (128 x 256 would be 256 and spill).
ONE_PASS_TILE = (128, 128, 8, 4)
GROUP_M = 8
# Elements per program of the combine.
COMBINE_BLOCK = 1024


def _sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return SMS


def _unsplit_tile(m: int, n: int, sms: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) of an unsplit M x N output: the bundled rules."""
    if m <= SINGLE_MAX_M:
        if triton.cdiv(n, SINGLE_WIDE_BLOCK_N) >= SINGLE_WIDE_MIN_TILES:
            return DECODE_BLOCK_M, SINGLE_WIDE_BLOCK_N, DECODE_WARPS, SINGLE_WIDE_STAGES
        return DECODE_BLOCK_M, SINGLE_BLOCK_N, DECODE_WARPS, SINGLE_STAGES
    if m <= DECODE_MAX_M:
        if triton.cdiv(n, DECODE_WIDE_BLOCK_N) >= DECODE_WIDE_MIN_TILES:
            return DECODE_BLOCK_M, DECODE_WIDE_BLOCK_N, DECODE_WARPS, DECODE_WIDE_STAGES
        if triton.cdiv(n, DECODE_MID_BLOCK_N) >= DECODE_MID_MIN_TILES:
            return DECODE_BLOCK_M, DECODE_MID_BLOCK_N, DECODE_WARPS, DECODE_MID_STAGES
        return DECODE_BLOCK_M, DECODE_BLOCK_N, DECODE_WARPS, DECODE_STAGES
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
    # Waves x tile area: the time of each choice, up to the tiles' efficiencies.
    if narrow * 100 < wide * NARROW_EFFICIENCY_PERCENT:
        return NARROW_BLOCK_M, NARROW_BLOCK_N, NARROW_WARPS, NARROW_STAGES
    return WIDE_BLOCK_M, WIDE_BLOCK_N, WIDE_WARPS, WIDE_STAGES


def split_len(k: int, n: int) -> int:
    """K elements per slice of a split layer: from the layer (K, N) alone, a multiple of BLOCK_K."""
    if SPLIT_LEN is not None:
        return max(BLOCK_K, SPLIT_LEN // BLOCK_K * BLOCK_K)
    return max(BLOCK_K, n // SPLIT_LEN_DIVISOR // BLOCK_K * BLOCK_K)


def split_count(k: int, n: int) -> int:
    """Number of K slices of a layer: 1 unless K is long against N; never a function of M."""
    if k < SPLIT_MIN_K_OVER_N * n:
        return 1
    return triton.cdiv(k, split_len(k, n))


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
def _slice_sum(
    a_src,
    b_src,
    off_m,
    off_n,
    k_begin,
    k_end,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    # p_s: one slice's K blocks, in order, into an accumulator that starts at zero. The only
    # place either schedule multiplies; TMA and pointer loads read the same zeros past the edges.
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    for k in tl.range(k_begin, k_end, BLOCK_K, num_stages=NUM_STAGES):
        if USE_TMA:
            a = a_src.load([off_m, k])
            b = b_src.load([k, off_n])
        else:
            a_mask = (rows[:, None] < M) & (k + ks[None, :] < K)
            b_mask = (k + ks[:, None] < K) & (cols[None, :] < N)
            a_ptrs = a_src + rows[:, None] * stride_am + (k + ks[None, :]) * stride_ak
            b_ptrs = b_src + (k + ks[:, None]) * stride_bk + cols[None, :] * stride_bn
            a = tl.load(a_ptrs, mask=a_mask, other=0.0)
            b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _store_tile(
    c_src, acc, off_m, off_n, M, N, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr,
):  # fmt: skip
    # The one rounding to the output dtype; TMA clips the tile to the matrix, pointers mask it.
    if USE_TMA:
        c_src.store([off_m, off_n], acc.to(c_src.dtype))
    else:
        rows = off_m + tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        c_ptrs = c_src + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        c_mask = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(c_ptrs, acc.to(c_src.dtype.element_ty), mask=c_mask)


@triton.jit
def _matmul_unsplit(
    a_src,
    b_src,
    c_src,
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
    USE_TMA: tl.constexpr,
):
    # S = 1: the bundled kernel, one accumulator over every K block, rounded once.
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = _slice_sum(
        a_src, b_src, off_m, off_n, 0, K, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
        BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, USE_TMA,
    )  # fmt: skip
    _store_tile(c_src, acc, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, USE_TMA)


@triton.jit
def _matmul_partials(
    a_src,
    b_src,
    ws_ptr,
    M,
    N,
    K,
    SLICE_LEN,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    # Program (tile, slice): p_slice of one output tile, stored in fp32 at ws[slice].
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    slice_id = tl.program_id(1)
    k_begin = slice_id * SLICE_LEN
    k_end = tl.minimum(k_begin + SLICE_LEN, K)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = _slice_sum(
        a_src, b_src, off_m, off_n, k_begin, k_end, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
        BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, USE_TMA,
    )  # fmt: skip
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    ws = ws_ptr + slice_id.to(tl.int64) * M * N + rows[:, None] * N + cols[None, :]
    tl.store(ws, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _combine_partials(ws_ptr, c_ptr, MN, NUM_SLICES, BLOCK: tl.constexpr):
    # c = round(((0 + p_0) + p_1) + ...): the slices in index order, the one rounding at the end.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, NUM_SLICES):
        total = total + tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, total.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _matmul_one_pass(
    a_src,
    b_src,
    c_src,
    M,
    N,
    K,
    SLICE_LEN,
    NUM_SLICES,
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
    USE_TMA: tl.constexpr,
):
    # One program per output tile, every slice: acc (inside _slice_sum) restarts at each slice
    # boundary and is added into total, as the combine adds the workspace's slices.
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    total = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for s in range(0, NUM_SLICES):
        k_begin = s * SLICE_LEN
        k_end = tl.minimum(k_begin + SLICE_LEN, K)
        acc = _slice_sum(
            a_src, b_src, off_m, off_n, k_begin, k_end, M, N, K, stride_am, stride_ak, stride_bk,
            stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, USE_TMA,
        )  # fmt: skip
        total = total + acc
    _store_tile(c_src, total, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, USE_TMA)


def _tma_ok(*tensors: torch.Tensor) -> bool:
    # TMA needs a unit inner stride and 16-byte aligned outer strides and base addresses.
    return all(
        t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0
        for t in tensors
    )


def _stages(stages: int, element_size: int) -> int:
    # 4-byte operands (the gate's fp32 probe) take twice the shared memory per stage.
    return stages if element_size <= 2 else max(2, stages // 2)


def _partial_tile(m: int) -> tuple[int, int, int, int]:
    for limit, block_m, block_n, warps, stages in PARTIAL_TILES:
        if m <= limit:
            return block_m, block_n, warps, stages
    raise ValueError(f"PARTIAL_TILES has no entry for M = {m}")


def _sources(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, block_m: int, block_n: int, tma: bool
) -> tuple[object, object, object]:
    """What the kernels load from: TMA descriptors, or the tensors themselves (pointer loads)."""
    if not tma:
        return a, b, c
    from triton.tools.tensor_descriptor import TensorDescriptor

    c_src = None if c is None else TensorDescriptor.from_tensor(c, [block_m, block_n])
    return (
        TensorDescriptor.from_tensor(a, [block_m, BLOCK_K]),
        TensorDescriptor.from_tensor(b, [BLOCK_K, block_n]),
        c_src,
    )


def _run_unsplit(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, warps, stages = _unsplit_tile(m, n, _sms(a.device))
    tma = bool(USE_TMA) and _tma_ok(a, b, c)
    a_src, b_src, c_src = _sources(a, b, c, block_m, block_n, tma)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    _matmul_unsplit[grid](
        a_src, b_src, c_src, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        NUM_STAGES=stages, USE_TMA=tma, num_warps=warps,
    )  # fmt: skip


def _run_partials(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, slice_len: int, slices: int) -> None:
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, warps, stages = _partial_tile(m)
    stages = _stages(stages, a.element_size())
    tma = bool(USE_TMA) and _tma_ok(a, b)
    a_src, b_src, _ = _sources(a, b, None, block_m, block_n, tma)
    ws = torch.empty((slices, m, n), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n), slices)
    _matmul_partials[grid](
        a_src, b_src, ws, m, n, k, slice_len, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, NUM_STAGES=stages,
        USE_TMA=tma, num_warps=warps,
    )  # fmt: skip
    _combine_partials[(triton.cdiv(m * n, COMBINE_BLOCK),)](ws, c, m * n, slices, BLOCK=COMBINE_BLOCK)


def _run_one_pass(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, slice_len: int, slices: int) -> None:
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, warps, stages = ONE_PASS_TILE
    stages = _stages(stages, a.element_size())
    tma = bool(USE_TMA) and _tma_ok(a, b, c)
    a_src, b_src, c_src = _sources(a, b, c, block_m, block_n, tma)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    _matmul_one_pass[grid](
        a_src, b_src, c_src, m, n, k, slice_len, slices, a.stride(0), a.stride(1), b.stride(0),
        b.stride(1), c.stride(0), c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=BLOCK_K,
        GROUP_M=GROUP_M, NUM_STAGES=stages, USE_TMA=tma, num_warps=warps,
    )  # fmt: skip


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0:
        return c
    slices = split_count(k, n)
    if slices == 1:
        _run_unsplit(a, b, c)
        return c
    # The schedule, not the sum: both compute ((0 + p_0) + p_1) + ... for every element.
    if m <= PARTIALS_MAX_M:
        _run_partials(a, b, c, split_len(k, n), slices)
    else:
        _run_one_pass(a, b, c, split_len(k, n), slices)
    return c
