"""Attention prefill candidate for Hopper: TMA descriptors, warp specialisation, tiles pinned per (D, causal).

The flash-attention forward of the seed, reorganised the way Hopper likes it:

- Q, K, V and O tiles move through device-side TMA descriptors (``tl.make_tensor_descriptor``),
  one per (sequence, head) and bounded by the sequence length, so a tile that runs past the end
  of a sequence reads zeros instead of the next head's rows, and an output tile that runs past
  it is clipped by the hardware.
- Two ways to walk the key blocks, chosen per (D, causal) in ``_TILES``:
  *staged*: the blocks that need no mask (left of the diagonal when causal, every full block
  otherwise) in one loop, then the blocks that do (the diagonal band, or the one partial block
  at the end of the sequence) in a second loop;
  *warp-specialised*: one loop over every block, with the mask applied to all of them, marked
  ``warp_specialize=True`` so that Triton 3.6 splits it into a TMA producer warp group and two
  consumer warp groups of 64 query rows each. Triton 3.6 warp-specialises one loop per kernel
  on Hopper (a second loop crashes its pass; ``compile_sm90.py`` shows it), hence one loop.
- The softmax runs in base 2 with ``sm_scale·log2(e)`` folded into one multiply per score
  (one FMA with the max subtraction where the block is unmasked).
- GQA maps query head ``h`` to key/value head ``h // (Hq // Hkv)``; the key/value tiles of one kv
  head are re-read by its query heads from L2.

Batch invariance: a program owns BLOCK_M query rows of one (sequence, query head) and walks that
head's key blocks from the first to the last in order, BLOCK_N keys at a time, with its stage
boundaries at the same keys whatever the batch. BLOCK_M, BLOCK_N, the warp count, the pipeline
depth and the walk come from ``tile_config``: head dim, causality and element size, never the
batch. The grid grows with the batch, but a program's arithmetic depends only on its own
(sequence, head, query block); there is no split-KV and there are no atomics.

Where TMA descriptors are unavailable (before Hopper) the same kernel loads through masked
pointers instead: same tiles, same walk, same key order, only the load and store instructions
differ (and no warp specialisation). Under Triton's interpreter both paths run and give
identical bits (``check_cpu.py``).
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634

# (head_dim, causal) -> (BLOCK_M, BLOCK_N, num_warps, num_stages, warp_specialize), for 2-byte
# elements. Non-causal D=128: the configuration Triton's Hopper warp specialisation targets
# (128×128 tiles; the compiler adds a producer warp group and splits the 128 query rows across
# two consumer warp groups). Causal: no warp specialisation, 8 warps over 128×64 tiles, three
# K/V stages in flight.
_TILES = {
    (128, False): (128, 128, 4, 2, True),
    (128, True): (128, 64, 8, 3, False),
    (64, False): (128, 128, 4, 3, True),
    (64, True): (128, 64, 4, 3, False),
}
# Alternatives the GPU sweep times against the table (same kernel, other pins); kernel() never
# reads them.
SWEEP_TILES = {
    (128, False): [
        (128, 128, 4, 2, True),
        (128, 64, 4, 3, True),
        (128, 128, 8, 2, False),
        (128, 64, 8, 3, False),
    ],
    (128, True): [
        (128, 64, 8, 3, False),
        (128, 128, 8, 2, False),
        (128, 128, 4, 2, True),
        (128, 64, 4, 3, True),
    ],
}
# 4-byte elements (the fp32 probe) and other head dims: small tiles that fit shared memory,
# no warp specialisation.
_WIDE_TILES = {128: (64, 32, 4, 2, False), 64: (64, 64, 4, 2, False)}
_SMALL_HEAD_TILES = (32, 16, 4, 2, False)

# The mask a key-block stage applies: none (blocks wholly visible), the causal diagonal, or the
# end of the sequence (the last, partial block of a non-causal walk).
NO_MASK = tl.constexpr(0)
CAUSAL_MASK = tl.constexpr(1)
TAIL_MASK = tl.constexpr(2)


def tile_config(head_dim: int, causal: bool, element_size: int) -> tuple[int, int, int, int, bool]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages, warp_specialize): never a function of the batch."""
    if head_dim < 64:
        return _SMALL_HEAD_TILES
    if element_size > 2:
        return _WIDE_TILES.get(head_dim, _SMALL_HEAD_TILES)
    return _TILES.get((head_dim, causal), _SMALL_HEAD_TILES)


@triton.jit
def _load_rows(src, row0, seq_len, BLOCK_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr):
    """Rows [row0, row0 + BLOCK_ROWS) of one head; rows at or past seq_len read as zeros."""
    if USE_TMA:
        return src.load([row0, 0])
    else:
        rows = row0 + tl.arange(0, BLOCK_ROWS)
        cols = tl.arange(0, HEAD_DIM)
        return tl.load(
            src + rows[:, None] * HEAD_DIM + cols[None, :], mask=(rows < seq_len)[:, None], other=0.0
        )


@triton.jit
def _store_rows(
    dst, row0, seq_len, tile, BLOCK_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr
):
    """Writes the rows of ``tile`` that lie inside the sequence."""
    if USE_TMA:
        dst.store([row0, 0], tile)
    else:
        rows = row0 + tl.arange(0, BLOCK_ROWS)
        cols = tl.arange(0, HEAD_DIM)
        tl.store(dst + rows[:, None] * HEAD_DIM + cols[None, :], tile, mask=(rows < seq_len)[:, None])


@triton.jit
def _attend_key_blocks(
    acc,
    l_i,
    m_i,
    q,
    k_src,
    v_src,  #
    offs_m,
    lo,
    hi,
    seq_len,
    qk_scale,  #
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    MASK: tl.constexpr,  #
    WARP_SPECIALIZE: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    """Online softmax over the key blocks starting at lo, lo + BLOCK_N, … below hi, in that order."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _load_rows(k_src, start_n, seq_len, BLOCK_N, HEAD_DIM, USE_TMA)
        qk = tl.dot(q, k.T)
        if MASK == NO_MASK:
            # max(x)·c == max(x·c) for c > 0, so the scale joins the subtraction as one FMA.
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        else:
            cols = start_n + offs_n
            if MASK == CAUSAL_MASK:  # noqa: SIM108 - constexpr branches read better in a kernel
                visible = cols[None, :] <= offs_m[:, None]
            else:
                visible = (cols < seq_len)[None, :]
            # Every row keeps at least one key here (its own position, or the block's first key),
            # so m_new stays finite and exp2 of the hidden scores is exactly 0.
            qk = tl.where(visible, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_new)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = _load_rows(v_src, start_n, seq_len, BLOCK_N, HEAD_DIM, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc)
        # Updated last, after the second dot, to keep fewer values live across it.
        l_i = l_i * alpha + l_ij
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attention_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,  #
    qk_scale,
    seq_len,
    q_heads,
    group,  #
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,  #
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,  #
    WARP_SPECIALIZE: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    m_blocks = tl.cdiv(seq_len, BLOCK_M)
    m_block = tl.program_id(0)
    if CAUSAL:
        # The longest rows (last query blocks) start first, so short ones fill the tail of the launch.
        m_block = m_blocks - 1 - m_block
    seq_head = tl.program_id(1)
    seq = seq_head // q_heads
    kv_head = (seq_head % q_heads) // group
    kv_heads = q_heads // group
    head_rows = seq_len.to(tl.int64) * HEAD_DIM
    q_base = q_ptr + seq_head.to(tl.int64) * head_rows
    o_base = o_ptr + seq_head.to(tl.int64) * head_rows
    kv_offset = (seq * kv_heads + kv_head).to(tl.int64) * head_rows
    k_base = k_ptr + kv_offset
    v_base = v_ptr + kv_offset

    if USE_TMA:
        # One descriptor per head, bounded by this sequence: TMA zero-fills rows past seq_len on
        # load and drops them on store.
        q_src = tl.make_tensor_descriptor(q_base, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
        o_dst = tl.make_tensor_descriptor(o_base, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
        k_src = tl.make_tensor_descriptor(k_base, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
        v_src = tl.make_tensor_descriptor(v_base, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    else:
        q_src = q_base
        o_dst = o_base
        k_src = k_base
        v_src = v_base

    q_start = m_block * BLOCK_M
    offs_m = q_start + tl.arange(0, BLOCK_M)
    q = _load_rows(q_src, q_start, seq_len, BLOCK_M, HEAD_DIM, USE_TMA)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    if WARP_SPECIALIZE:
        # Triton 3.6 warp-specialises one loop per kernel on Hopper: a second key-block loop in
        # the same kernel crashes its NVGPUWarpSpecialization pass, and a mask under a runtime
        # branch inside the loop turns warp specialisation off. So the whole walk is one loop
        # that applies its mask to every block; for the blocks that need none it keeps every key.
        # The pointer path walks the same single loop, unspecialised: Triton's Hopper warp
        # specialisation also crashes on pointer-based loops with tl.dot (triton-lang/triton#9728).
        hi = tl.minimum(q_start + BLOCK_M, seq_len) if CAUSAL else seq_len
        acc, l_i, m_i = _attend_key_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            offs_m,
            0,
            hi,
            seq_len,
            qk_scale,  #
            BLOCK_N,
            HEAD_DIM,
            CAUSAL_MASK if CAUSAL else TAIL_MASK,
            USE_TMA,
            USE_TMA,
        )
    elif CAUSAL:
        # Off-band: every key block left of this query block is wholly visible.
        acc, l_i, m_i = _attend_key_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            offs_m,
            0,
            q_start,
            seq_len,
            qk_scale,  #
            BLOCK_N,
            HEAD_DIM,
            NO_MASK,
            False,
            USE_TMA,
        )
        # On-band: the key blocks that share this query block's positions, masked on the diagonal.
        acc, l_i, m_i = _attend_key_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            offs_m,
            q_start,
            tl.minimum(q_start + BLOCK_M, seq_len),
            seq_len,
            qk_scale,
            BLOCK_N,
            HEAD_DIM,
            CAUSAL_MASK,
            False,
            USE_TMA,
        )
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attend_key_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            offs_m,
            0,
            full_end,
            seq_len,
            qk_scale,  #
            BLOCK_N,
            HEAD_DIM,
            NO_MASK,
            False,
            USE_TMA,
        )
        # The partial block at the end of the sequence, if any: zero iterations otherwise.
        acc, l_i, m_i = _attend_key_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_src,
            v_src,
            offs_m,
            full_end,
            seq_len,
            seq_len,
            qk_scale,  #
            BLOCK_N,
            HEAD_DIM,
            TAIL_MASK,
            False,
            USE_TMA,
        )

    out = acc / l_i[:, None]
    _store_rows(o_dst, q_start, seq_len, out.to(o_ptr.dtype.element_ty), BLOCK_M, HEAD_DIM, USE_TMA)


def _descriptor_scratch(size: int, alignment: int, stream):
    """Global memory where device-side TMA descriptors are written before use (128 bytes each)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _tma_available(x: torch.Tensor) -> bool:
    if not x.is_cuda:
        # Triton's interpreter emulates descriptors, zero fill included.
        return True
    return torch.cuda.get_device_capability(x.device)[0] >= 9


def _aligned(x: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor whose start TMA can address (16-byte aligned)."""
    x = x.contiguous()
    return x if x.data_ptr() % 16 == 0 else x.clone()


def forward(q, k, v, causal, sm_scale, use_tma=None, tiles=None):
    """The kernel with its load path and tiles exposed, for the CPU checks and the GPU sweep."""
    batch, q_heads, seq_len, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = torch.empty_like(q)
    use_tma = _tma_available(q) if use_tma is None else use_tma
    block_m, block_n, num_warps, num_stages, warp_specialize = tiles or tile_config(
        head_dim, bool(causal), q.element_size()
    )
    if use_tma and q.is_cuda:
        # Set on every call: the allocator lives in a context variable, which a worker thread
        # would not inherit from the importing one.
        triton.set_allocator(_descriptor_scratch)
    grid = (triton.cdiv(seq_len, block_m), batch * q_heads)
    _attention_forward[grid](
        q,
        k,
        v,
        o,  #
        sm_scale * LOG2E,
        seq_len,
        q_heads,
        q_heads // kv_heads,  #
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,  #
        WARP_SPECIALIZE=warp_specialize,
        USE_TMA=use_tma,  #
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return o


def kernel(q, k, v, causal, sm_scale):
    return forward(q, k, v, causal, sm_scale)
