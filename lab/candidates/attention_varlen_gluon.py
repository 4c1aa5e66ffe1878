"""Ragged prefill on Hopper: the bundled prefill kernel's per-tile Gluon forward (TMA, mbarriers,
async wgmma, a producer warp), with each sequence's rows found through ``cu_seqlens``; the seed's
flash forward everywhere else.

Two paths; which one runs depends on the device, the dtype and the head dim only (never on the
pack):

- **per tile** (``_varlen_forward``; Hopper, bf16/fp16, head dim 64/128): one program per 128
  query rows of one (sequence, query head), split between two consumer warp groups of 64 rows and
  one producer warp that streams the sequence's K and V tiles through a NUM_STAGES-deep ring;
- **portable** (``_flash_forward``, the seed's kernel): fp32 (the gate's probe), other head dims,
  GPUs before Hopper and the CPU interpreter.

The per-tile path is ``nodice/kernels/attention_prefill.py``'s, with three changes for a packed
batch:

- **Descriptors per (sequence, head).** A program reads its sequence's offsets from
  ``cu_seqlens_q`` and ``cu_seqlens_k`` and builds its TMA descriptors on the device over that
  sequence's rows of one head: base ``q + (start · Hq + head) · D``, shape ``[len, D]``, row stride
  ``Hq · D`` (``Hkv · D`` for K and V). Rows past the sequence's end read as zeros and are dropped
  on store, as at the end of a prefill sequence: nothing of a batchmate is read or written.
- **Keys ahead of the queries.** Query i of a sequence sees keys up to ``i + k_len − q_len``
  (bottom-right, as FlashAttention aligns a causal mask); the key walk, the first masked block and
  the mask itself move by that offset. The task's own inputs have ``k_len = q_len``.
- **The grid** is (query blocks of the longest sequence, sequence × query head): a program past its
  sequence's last block exits at once. ``max_seqlen_q`` sizes the grid only.

Batch invariance: the tile shape, the stage count, the key order (blocks 0, 1, …, BLOCK_N keys
each) and the masked blocks depend on the head dim, causality, the dtype and the sequence's own
lengths. A row's arithmetic is the same sequence of MMAs and softmax steps wherever the sequence
sits in the pack and whatever its batchmates are. No split-KV, no atomics.
"""

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.core import _aggregate as aggregate

LOG2E = 1.4426950408889634
# Rows per consumer warp group: wgmma's M with 4 warps; two consumers per program.
ROWS_PER_CONSUMER = gl.constexpr(64)
BLOCK_M = gl.constexpr(128)

# head_dim -> (BLOCK_N, NUM_STAGES), the prefill kernel's tiles. D=128: 32 KB of Q plus 2 × 64 KB
# of K/V stages.
_TILES = {128: (128, 2), 64: (128, 3)}
# Registers per thread: the producer warp gives most of its share to the consumers.
_PRODUCER_REGS = gl.constexpr(24)
_CONSUMER_REGS = gl.constexpr(240)
_LAUNCH_MAXNREG = 168  # 65536 registers / (3 warp groups × 128 threads), rounded down to 8

KNOBS = {
    "_TILES[128][1]": (2, 3),
    "_TILES[64][1]": (2, 3, 4),
}
ORDER_KNOBS = {
    "_TILES[128][0]": (64, 128),
    "_TILES[64][0]": (64, 128),
}


@aggregate
class _Shared:
    """Everything the three partitions share: the sequence's base pointers and lengths, buffers,
    barriers, the walk. TMA descriptors are built inside the partition that uses them (the producer
    for Q, K, V, each consumer for its O): a descriptor written by one warp and used by another
    would need a tensormap acquire fence in the user, which the partitions do not issue."""

    q_base: gl.tensor
    k_base: gl.tensor
    v_base: gl.tensor
    o_base: gl.tensor
    q_bufs: gl.shared_memory_descriptor
    k_bufs: gl.shared_memory_descriptor
    v_bufs: gl.shared_memory_descriptor
    q_ready: gl.shared_memory_descriptor
    k_ready: gl.shared_memory_descriptor
    v_ready: gl.shared_memory_descriptor
    k_empty: gl.shared_memory_descriptor
    v_empty: gl.shared_memory_descriptor
    q_start: gl.tensor
    q_len: gl.tensor
    k_len: gl.tensor
    q_stride: gl.tensor
    k_stride: gl.tensor
    key_blocks: gl.tensor
    qk_scale: gl.tensor
    CAUSAL: gl.constexpr

    @gluon.constexpr_function
    def __init__(
        self,
        q_base,
        k_base,
        v_base,
        o_base,
        q_bufs,
        k_bufs,
        v_bufs,
        q_ready,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        q_start,
        q_len,
        k_len,
        q_stride,
        k_stride,
        key_blocks,
        qk_scale,
        CAUSAL,
    ):
        self.q_base = q_base
        self.k_base = k_base
        self.v_base = v_base
        self.o_base = o_base
        self.q_bufs = q_bufs
        self.k_bufs = k_bufs
        self.v_bufs = v_bufs
        self.q_ready = q_ready
        self.k_ready = k_ready
        self.v_ready = v_ready
        self.k_empty = k_empty
        self.v_empty = v_empty
        self.q_start = q_start
        self.q_len = q_len
        self.k_len = k_len
        self.q_stride = q_stride
        self.k_stride = k_stride
        self.key_blocks = key_blocks
        self.qk_scale = qk_scale
        self.CAUSAL = gl.constexpr(CAUSAL)


@gluon.jit
def _rows_descriptor(base, rows, stride, bufs):
    """A TMA descriptor over one sequence's [rows, HEAD_DIM] of one head (``stride`` elements between
    two tokens), in tiles shaped like ``bufs``' slots. Bounded by the sequence: rows past its end
    read as zeros and are dropped on store."""
    ROWS: gl.constexpr = bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = bufs.type.shape[2]
    return tma.make_tensor_descriptor(base, [rows, HEAD_DIM], [stride, 1], [ROWS, HEAD_DIM], bufs.layout)


@gluon.jit
def _producer(sh: _Shared):
    """One warp: both consumers' Q tiles, then K_j and V_j into the ring, as stages free up."""
    NUM_STAGES: gl.constexpr = sh.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = sh.k_bufs.type.shape[1]
    q_desc = _rows_descriptor(sh.q_base, sh.q_len, sh.q_stride, sh.q_bufs)
    k_desc = _rows_descriptor(sh.k_base, sh.k_len, sh.k_stride, sh.k_bufs)
    v_desc = _rows_descriptor(sh.v_base, sh.k_len, sh.k_stride, sh.v_bufs)
    for w in gl.static_range(2):
        # The transaction count is the whole box: TMA writes zeros for rows past q_len.
        mbarrier.expect(sh.q_ready.index(w), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            q_desc, [sh.q_start + w * ROWS_PER_CONSUMER, 0], sh.q_ready.index(w), sh.q_bufs.index(w)
        )
    for j in range(sh.key_blocks):
        stage = j % NUM_STAGES
        # Round r = j // NUM_STAGES of a stage waits for the consumers' release of round r - 1;
        # waiting on the opposite parity lets round 0 through a freshly initialised barrier.
        free_phase = ((j // NUM_STAGES) & 1) ^ 1
        # K first: a consumer's Q·Kᵀ can start while V is still in flight.
        mbarrier.wait(sh.k_empty.index(stage), free_phase)
        mbarrier.expect(sh.k_ready.index(stage), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            k_desc, [j * BLOCK_N, 0], sh.k_ready.index(stage), sh.k_bufs.index(stage)
        )
        mbarrier.wait(sh.v_empty.index(stage), free_phase)
        mbarrier.expect(sh.v_ready.index(stage), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            v_desc, [j * BLOCK_N, 0], sh.v_ready.index(stage), sh.v_bufs.index(stage)
        )


@gluon.jit
def _softmax_block(s, m_i, l_i, rows, start_n, sh: _Shared, masked, s_layout: gl.constexpr):
    """Online softmax of one score block: P (fp32), the rescale factor, the updated max and sum."""
    BLOCK_N: gl.constexpr = s.shape[1]
    if masked:
        # Only the blocks from the diagonal on (causal) or the last, partial block (not causal) get
        # here; every row of the sequence keeps at least one key, so the new max is finite and
        # exp2(-inf) = 0. Rows past the sequence's end see zeros past k_len and are not stored.
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if sh.CAUSAL:
            visible = gl.expand_dims(cols, 0) <= gl.expand_dims(rows + (sh.k_len - sh.q_len), 1)
        else:
            visible = gl.expand_dims(cols < sh.k_len, 0)
        s = gl.where(visible, s, float("-inf"))
    # max(x)·c == max(x·c) for c > 0, so the scale joins the subtraction as one FMA.
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * sh.qk_scale)
    p = gl.exp2(s * sh.qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_new


@gluon.jit
def _consumer(sh: _Shared, WARP_GROUP: gl.constexpr):
    """Rows [q_start + 64·WARP_GROUP, +64): all key blocks, S_j and P_{j-1}·V_{j-1} overlapped."""
    NUM_STAGES: gl.constexpr = sh.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = sh.k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = sh.k_bufs.type.shape[2]
    dtype: gl.constexpr = sh.k_bufs.dtype
    # S = Q·Kᵀ is [64, BLOCK_N], O is [64, HEAD_DIM]: one warp group, wgmma N = the full width.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    # P feeds the second wgmma from registers: for 16-bit types the first wgmma's accumulator
    # fragment is already this operand's fragment, so the conversion moves no data.
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s_rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)

    row0 = sh.q_start + WARP_GROUP * ROWS_PER_CONSUMER
    rows = row0 + gl.arange(0, ROWS_PER_CONSUMER, layout=s_rows)
    q_buf = sh.q_bufs.index(WARP_GROUP)
    # Key blocks that need a mask: from the one holding this warp group's first row's horizon
    # (causal), or the partial block at the end of the keys (not causal).
    if sh.CAUSAL:  # noqa: SIM108 - constexpr branches read better in a kernel
        first_masked = (row0 + (sh.k_len - sh.q_len)) // BLOCK_N
    else:
        first_masked = sh.k_len // BLOCK_N
    zeros_s = gl.zeros([ROWS_PER_CONSUMER, BLOCK_N], gl.float32, layout=s_layout)
    m_i = gl.full([ROWS_PER_CONSUMER], float("-inf"), gl.float32, layout=s_rows)
    l_i = gl.zeros([ROWS_PER_CONSUMER], gl.float32, layout=s_rows)
    acc = gl.zeros([ROWS_PER_CONSUMER, HEAD_DIM], gl.float32, layout=o_layout)

    # Block 0: S_0, softmax, nothing to overlap with yet.
    mbarrier.wait(sh.q_ready.index(WARP_GROUP), 0)
    mbarrier.wait(sh.k_ready.index(0), 0)
    s_tok = warpgroup_mma(q_buf, sh.k_bufs.index(0).permute((1, 0)), zeros_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s_tok, q_buf, sh.k_bufs.index(0)))[0]
    # This warp group's wgmmas have read K_0. The arrive synchronises the partition's 4 warps
    # first and is issued by one thread, so the count of 2 is one per consumer.
    mbarrier.arrive(sh.k_empty.index(0), count=1)
    p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, rows, 0, sh, first_masked <= 0, s_layout)
    p_prev = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)

    for j in range(1, sh.key_blocks):
        stage = j % NUM_STAGES
        prev = (j - 1) % NUM_STAGES
        # S_j = Q·K_jᵀ, asynchronously.
        mbarrier.wait(sh.k_ready.index(stage), (j // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(
            q_buf, sh.k_bufs.index(stage).permute((1, 0)), zeros_s, use_acc=False, is_async=True
        )
        # O += P_{j-1}·V_{j-1}, queued behind it.
        mbarrier.wait(sh.v_ready.index(prev), ((j - 1) // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_prev, sh.v_bufs.index(prev), acc, is_async=True)
        # wgmma groups complete in issue order: "at most 1 outstanding" means S_j is done.
        s = warpgroup_mma_wait(1, deps=(s_tok, q_buf, sh.k_bufs.index(stage)))[0]
        mbarrier.arrive(sh.k_empty.index(stage), count=1)
        # The softmax of S_j overlaps the tensor core's P_{j-1}·V_{j-1}.
        p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, rows, j * BLOCK_N, sh, j >= first_masked, s_layout)
        p_new = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)
        acc, p_prev, _ = warpgroup_mma_wait(0, deps=(acc_tok, p_prev, sh.v_bufs.index(prev)))
        mbarrier.arrive(sh.v_empty.index(prev), count=1)
        # Rescale O from m_{j-1} to m_j before P_j·V_j is added to it.
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, o_rows, assert_trivial=True), 1)
        p_prev = p_new

    # The last block's P·V.
    last = (sh.key_blocks - 1) % NUM_STAGES
    mbarrier.wait(sh.v_ready.index(last), ((sh.key_blocks - 1) // NUM_STAGES) & 1)
    acc_tok = warpgroup_mma(p_prev, sh.v_bufs.index(last), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc_tok, p_prev, sh.v_bufs.index(last)))[0]
    mbarrier.arrive(sh.v_empty.index(last), count=1)

    out = acc / gl.expand_dims(gl.convert_layout(l_i, o_rows, assert_trivial=True), 1)
    # Q's buffer is free: stage O there and let TMA store it; the descriptor is bounded by q_len,
    # so rows past the sequence are dropped.
    q_buf.store(out.to(dtype))
    # Order the generic-proxy stores before the async-proxy (TMA) read of the buffer.
    fence_async_shared()
    o_desc = _rows_descriptor(sh.o_base, sh.q_len, sh.q_stride, sh.q_bufs)
    tma.async_copy_shared_to_global(o_desc, [row0, 0], q_buf)
    tma.store_wait(pendings=0)


@gluon.jit
def _consumer_0(sh: _Shared):
    _consumer(sh, 0)


@gluon.jit
def _consumer_1(sh: _Shared):
    _consumer(sh, 1)


@triton.jit
def _plan_tiles(cu_q_ptr, tiles_ptr, n_slots, BLOCK_M: tl.constexpr, CHUNK: tl.constexpr):
    """The list of query tiles, one slot each: ``tiles[0, t]`` the sequence of slot t, ``tiles[1, t]``
    its query block. Program s writes sequence s's blocks after those of sequences 0 … s−1; slots past
    the last tile keep the −1 they were filled with. Which program runs which tile never changes a
    tile's arithmetic."""
    s = tl.program_id(0)
    offs = tl.arange(0, CHUNK)
    before = 0
    for c in range(0, s, CHUNK):
        idx = c + offs
        ok = idx < s
        lo = tl.load(cu_q_ptr + idx, mask=ok, other=0)
        hi = tl.load(cu_q_ptr + idx + 1, mask=ok, other=0)
        before += tl.sum((hi - lo + BLOCK_M - 1) // BLOCK_M)
    q_len = tl.load(cu_q_ptr + s + 1) - tl.load(cu_q_ptr + s)
    blocks = (q_len + BLOCK_M - 1) // BLOCK_M
    for c in range(0, blocks, CHUNK):
        idx = c + offs
        ok = idx < blocks
        tl.store(tiles_ptr + before + idx, tl.full([CHUNK], 0, tl.int32) + s, mask=ok)
        tl.store(tiles_ptr + n_slots + before + idx, idx, mask=ok)


@gluon.jit
def _varlen_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,  #
    cu_q_ptr,
    cu_k_ptr,
    tiles_ptr,
    n_slots,
    qk_scale,
    q_heads,
    group,  #
    CAUSAL: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr,
):
    gl.static_assert(BLOCK_M % BLOCK_N == 0 or BLOCK_N % BLOCK_M == 0)
    dtype: gl.constexpr = q_ptr.dtype.element_ty
    # Programs in order (KV head, tile, query head of its group): the group's query heads read one
    # tile's K and V side by side, and one KV head's tiles follow each other, so its K and V (16 MB
    # for 32K tokens at D = 128) stay in L2 while they are swept.
    pid = gl.program_id(0)
    member = pid % group
    slot = (pid // group) % n_slots
    kv_head = pid // (group * n_slots)
    q_head = kv_head * group + member
    seq = gl.load(tiles_ptr + slot)
    if seq >= 0:
        m_block = gl.load(tiles_ptr + n_slots + slot)
        kv_heads = q_heads // group
        q_tok = gl.load(cu_q_ptr + seq)
        q_len = gl.load(cu_q_ptr + seq + 1) - q_tok
        k_tok = gl.load(cu_k_ptr + seq)
        k_len = gl.load(cu_k_ptr + seq + 1) - k_tok
        if CAUSAL:
            # A sequence's longest rows (its last query blocks) start first, so short ones fill the tail.
            m_block = gl.cdiv(q_len, BLOCK_M) - 1 - m_block
        q_start = m_block * BLOCK_M
        if CAUSAL:
            key_blocks = gl.cdiv(gl.minimum(q_start + BLOCK_M + (k_len - q_len), k_len), BLOCK_N)
        else:
            key_blocks = gl.cdiv(k_len, BLOCK_N)
        q_stride = q_heads * HEAD_DIM
        k_stride = kv_heads * HEAD_DIM
        q_offset = q_tok.to(gl.int64) * q_stride + q_head * HEAD_DIM
        kv_offset = k_tok.to(gl.int64) * k_stride + kv_head * HEAD_DIM

        q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ROWS_PER_CONSUMER, HEAD_DIM], dtype)
        kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
        q_bufs = gl.allocate_shared_memory(dtype, [2, ROWS_PER_CONSUMER, HEAD_DIM], q_layout)
        k_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], kv_layout)
        v_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], kv_layout)
        q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        for w in gl.static_range(2):
            # Completed by the producer's expect (one arrive) plus the TMA's byte count.
            mbarrier.init(q_ready.index(w), count=1)
        for s in gl.static_range(NUM_STAGES):
            mbarrier.init(k_ready.index(s), count=1)
            mbarrier.init(v_ready.index(s), count=1)
            # One arrive per consumer warp group.
            mbarrier.init(k_empty.index(s), count=2)
            mbarrier.init(v_empty.index(s), count=2)
        # Make the initialised barriers visible to the async proxy (TMA, wgmma) before any use.
        fence_async_shared()

        # gl.to_tensor: the JIT turns integer arguments equal to 1 into constants, which the
        # aggregate's tensor fields would reject.
        sh = _Shared(
            q_ptr + q_offset,
            k_ptr + kv_offset,
            v_ptr + kv_offset,
            o_ptr + q_offset,
            q_bufs,
            k_bufs,
            v_bufs,
            q_ready,
            k_ready,
            v_ready,
            k_empty,
            v_empty,
            gl.to_tensor(q_start),
            gl.to_tensor(q_len),
            gl.to_tensor(k_len),
            gl.to_tensor(q_stride),
            gl.to_tensor(k_stride),
            gl.to_tensor(key_blocks),
            gl.to_tensor(qk_scale),
            CAUSAL,
        )
        # Default partition (num_warps = 4): consumer 0. Workers: consumer 1 (4 warps) and the
        # producer (1 warp), which hands its registers to the consumers.
        gl.warp_specialize(
            [
                (_consumer_0, (sh,)),
                (_consumer_1, (sh,)),
                (_producer, (sh,)),
            ],
            [4, 1],
            [_CONSUMER_REGS, _PRODUCER_REGS],
        )


def _descriptor_scratch(size: int, alignment: int, stream):
    """Global memory where device-side TMA descriptors are written before use (128 bytes each)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _aligned(x: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor whose start TMA can address (16-byte aligned)."""
    x = x.contiguous()
    return x if x.data_ptr() % 16 == 0 else x.clone()


def _hopper_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, sm_scale):
    _, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = torch.empty_like(q)
    block_n, num_stages = _TILES[head_dim]
    # Set on every call: the allocator lives in a context variable, which a worker thread would
    # not inherit from the importing one.
    triton.set_allocator(_descriptor_scratch)
    cu_q = cu_seqlens_q.to(torch.int32)
    n_seqs = cu_q.shape[0] - 1
    # Slots for every query tile without reading the lengths on the host: a sequence of n tokens
    # has at most n / BLOCK_M + 1 tiles (and an empty one none).
    n_slots = triton.cdiv(q.shape[0], BLOCK_M.value) + n_seqs
    tiles = torch.full((2, n_slots), -1, dtype=torch.int32, device=q.device)
    _plan_tiles[(n_seqs,)](cu_q, tiles, n_slots, BLOCK_M=BLOCK_M.value, CHUNK=256)
    _varlen_forward[(n_slots * q_heads,)](
        q,
        k,
        v,
        o,  #
        cu_q,
        cu_seqlens_k.to(torch.int32),
        tiles,
        n_slots,
        sm_scale * LOG2E,
        q_heads,
        q_heads // kv_heads,  #
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_N=block_n,
        NUM_STAGES=num_stages,  #
        num_warps=4,
        maxnreg=_LAUNCH_MAXNREG,
    )
    return o


# ---- the portable path: the seed's flash forward ----------------------------------------


@triton.jit
def _flash_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    cu_q_ptr,
    cu_k_ptr,
    qk_scale,
    q_heads,
    group,
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m_block = tl.program_id(0)
    seq = tl.program_id(1)
    q_head = tl.program_id(2)
    kv_heads = q_heads // group
    kv_head = q_head // group
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    k_start = tl.load(cu_k_ptr + seq)
    k_len = tl.load(cu_k_ptr + seq + 1) - k_start
    q_row = q_heads * HEAD_DIM  # elements between two tokens of q and o
    k_row = kv_heads * HEAD_DIM

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < q_len
    q_base = q_ptr + q_start.to(tl.int64) * q_row + q_head * HEAD_DIM
    q = tl.load(q_base + offs_m[:, None] * q_row + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    k_base = k_ptr + k_start.to(tl.int64) * k_row + kv_head * HEAD_DIM
    v_base = v_ptr + k_start.to(tl.int64) * k_row + kv_head * HEAD_DIM

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Causal: query i sees keys up to i + (k_len - q_len) (aligned bottom-right), so a block
    # stops at its last row's horizon; a block past the sequence's end walks no keys at all.
    hi = k_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M + k_len - q_len, k_len)
    hi = tl.where(m_block * BLOCK_M < q_len, hi, 0)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < k_len
        # K read transposed ([HEAD_DIM, BLOCK_N]) so that Q·Kᵀ is one tl.dot.
        k = tl.load(k_base + cols[None, :] * k_row + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + (k_len - q_len))
        qk = tl.where(keep, qk, float("-inf"))
        # Every row sees key 0 in the first tile, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * k_row + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    # Rows past the sequence's end saw no keys: divide by 1, not 0 (they are not stored).
    out = acc / tl.where(row_ok, l_i, 1.0)[:, None]
    o_base = o_ptr + q_start.to(tl.int64) * q_row + q_head * HEAD_DIM
    tl.store(
        o_base + offs_m[:, None] * q_row + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


def _portable_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, sm_scale):
    _, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    # Tiles depend on the head dim and dtype only: Hopper-sized for real heads
    # (halved for 4-byte elements, to fit shared memory), small for tiny heads.
    if head_dim < 64:
        block_m, block_n = 32, 16
    elif q.element_size() <= 2:
        block_m, block_n = 128, 64
    else:
        block_m, block_n = 64, 32
    grid = (triton.cdiv(max_seqlen_q, block_m), cu_seqlens_q.shape[0] - 1, q_heads)
    _flash_forward[grid](
        q,
        k,
        v,
        o,
        cu_seqlens_q,
        cu_seqlens_k,
        sm_scale * LOG2E,
        q_heads,
        q_heads // kv_heads,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8 if head_dim >= 64 else 4,
        num_stages=3 if head_dim >= 64 and q.element_size() <= 2 else 2,
    )
    return o


def _hopper_path(q: torch.Tensor) -> bool:
    """The Gluon forward runs on Hopper in bf16/fp16 for head dims 64 and 128."""
    return (
        q.is_cuda
        and q.dtype in (torch.bfloat16, torch.float16)
        and q.shape[-1] in _TILES
        and torch.cuda.get_device_capability(q.device)[0] == 9
    )


def kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale):
    if _hopper_path(q):
        return _hopper_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, sm_scale)
    return _portable_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, sm_scale)
