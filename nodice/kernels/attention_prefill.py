"""Attention prefill: Gluon forwards for Hopper (TMA, mbarriers, async wgmma, a producer warp),
persistent where the sequence is whole tiles, and the flash forward of the seed everywhere else.

Three paths; which one runs depends on the device, the dtype, the head dim and the sequence length
only (never on the batch):

- **persistent** (``_attention_persistent``; Hopper, bf16/fp16, head dim 64/128, S a multiple of
  128 — every prefill workload of the task): one program per SM walks the 128-row tiles;
- **per tile** (``_attention_forward``; the same GPUs and dtypes, other sequence lengths): one
  program per 128 query rows of one (sequence, query head);
- **portable** (``_flash_forward``): everything else.

**Persistent path.** P = min(tiles, SMs) programs; program p takes the tiles p, p + P, p + 2P, …
(tiles head by head; causal ones in groups of four heads, longest first within a group, which
evens the programs' shares of key blocks). Its producer warp loads the next
tile's Q as soon as each consumer has finished its last Q·Kᵀ of the current one (``q_empty``), and
streams K/V through the ring without a break between tiles (the ring's stage and phase come from a
counter that runs on across tiles); each consumer writes O through its own staging buffer
(``o_bufs``), so the next tile's Q load and first blocks overlap the previous tile's epilogue and
store. That removes the per-tile prologue (barrier set-up, the Q load, the first S block without
overlap) that held the per-tile path at 0.88–0.95× cuDNN at 4K tokens and 0.55× at S = 512. TMA
descriptors are built on the host over the flattened ``[B·H·S, D]`` tensors; whole tiles keep
every tile inside its own head. Inside a tile the consumers run the per-tile path's loop below.

**Per-tile path.** One program owns BLOCK_M = 128 query rows of one (sequence, query head), split
between two consumer warp groups of 64 rows each (wgmma's M), and one producer warp that streams
the head's K and V tiles into a NUM_STAGES-deep ring of shared-memory buffers:

    producer (1 warp)         TMA: Q (once per consumer), then K_j and V_j for j = 0, 1, …
    consumer 0 (4 warps)      rows [q_start, q_start + 64)        } the same loop, on their own
    consumer 1 (4 warps)      rows [q_start + 64, q_start + 128)  } rows, not synchronised

Each consumer overlaps its softmax with the tensor core: it issues S_j = Q·K_jᵀ and
O += P_{j-1}·V_{j-1} as asynchronous wgmmas back to back, waits for S_j only, computes the online
softmax of S_j on the CUDA cores while P_{j-1}·V_{j-1} still runs, then waits for that and
rescales O. The softmax is in base 2 with ``sm_scale·log2(e)`` folded into one FMA per score;
P goes to the second wgmma from registers, in the layout the first one produced it in.

Synchronisation (every wait and arrive is commented where it happens):
    q_ready[w]      producer → consumer w     Q tile landed (TMA transaction count)
    k_ready[s]      producer → consumers      K tile of stage s landed
    v_ready[s]      producer → consumers      V tile of stage s landed
    k_empty[s]      consumers → producer      both consumers' wgmmas finished reading K of stage s
    v_empty[s]      consumers → producer      both consumers' wgmmas finished reading V of stage s
Barrier phases follow the usual ring: use j of stage s = j % NUM_STAGES waits phase
(j // NUM_STAGES) & 1 on the ready barrier, and the producer waits the opposite phase on the
empty one (a fresh barrier counts as having completed phase 1, so the first round passes).

**Portable path**: fp32 (the gate's probe on GPU), other head dims, GPUs before Hopper and the
CPU interpreter run the seed's flash forward (``_flash_forward``), unchanged.

Batch invariance, on every path: the tile shape, the stage count, the key order (blocks 0, 1, …,
BLOCK_N keys each) and which blocks are masked (the causal diagonal, the end of the sequence)
depend on the head dim, causality, the sequence length and the dtype only. A row's arithmetic
is the same sequence of MMAs and softmax steps whatever the batch; the grid grows with the batch
but no tile's work depends on it (on the persistent path, how many programs run and which one
takes a tile changes with the batch; what a tile computes does not). No split-KV, no atomics. The
fp32 probe of the gate exercises the portable path; the Gluon paths' own evidence is their
structure and the bf16 dynamic validation, whose GPU sequence lengths (200, 256, 384, 512) reach
both the per-tile path (200) and the persistent one, with several tiles per program in the larger
batches.

Measured on the H200 (2026-12-02, torch 2.11, Triton 3.6, cuDNN 9.19; the whole gate passed on
CUDA both times; lab/results/candidates_h200_2026-12-02_evening/check_attention_prefill_*.json):
over the 24 rows of the SPEC grid, 1.033× and 1.048× cuDNN SDPA geomean in two runs, lowest row
0.952× and 0.958×, 1.86× and 1.89× flash SDPA (FlashAttention-2), measured in the same runs. The
two serving rows: 0.92× cuDNN at B=16, S=2K and 0.70× at B=64, S=512 (the per-tile path had
0.82× and 0.55× there).
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

# head_dim -> (BLOCK_N, NUM_STAGES). D=128: 32 KB of Q plus 2 × 64 KB of K/V stages.
_TILES = {128: (128, 2), 64: (128, 3)}
# Registers per thread: the producer warp gives most of its share to the consumers.
_PRODUCER_REGS = gl.constexpr(24)
_CONSUMER_REGS = gl.constexpr(240)
_LAUNCH_MAXNREG = 168  # 65536 registers / (3 warp groups × 128 threads), rounded down to 8
# Causal walk order of the persistent path: heads in groups of this many, their tiles interleaved
# longest first (see ``_tile``). With one head per group, program p's tiles p, p + P, … land on
# the same few query blocks of every head, and the busiest program gets up to 45 % more work than
# the average (key blocks plus one per tile; B = 64, S = 512); with groups of four the excess is
# 1.5–3.1 % on every SPEC shape and both serving ones. A group
# of four query heads is one key/value head under GQA 32/8, so the keys in flight stay few.
CAUSAL_HEAD_GROUP = 4
# Measured on the H200 (2026-12-04, the walk-order sweep the knob search replaced; every group size
# bitwise equal to one head per group): the 14 causal workloads went from 0.943× to 1.033× cuDNN
# SDPA geomean, lowest 0.654× → 0.937× (B = 64, S = 512) and 0.852× → 1.010× (B = 16, S = 2K).
# Groups of 2, 8 and 16 measured 1.000×, 1.022× and 1.011×, and four again 1.002× in the same run
# (single rows move by up to ±0.1 between repeats; every group size beat one head per group).


# What `nodice evolve attention_prefill --agent knobs` searches (docs/search.md): the causal walk's
# head groups and the pipeline depth per head dim, bit for bit against the best version; and the key
# tile (``_TILES[d][0]``), which sets the online softmax's steps, so a new kernel judged by the gate.
# The query tile is the wgmma shape: not a knob.
KNOBS = {
    "CAUSAL_HEAD_GROUP": (1, 2, 4, 8, 16),
    "_TILES[128][1]": (2, 3),
    "_TILES[64][1]": (2, 3, 4),
}
ORDER_KNOBS = {
    "_TILES[128][0]": (64, 128),
    "_TILES[64][0]": (64, 128),
}


@aggregate
class _Shared:
    """Everything the three partitions share: the head's base pointers, buffers, barriers, the walk.

    TMA descriptors are built inside the partition that uses them (the producer for Q, K, V, each
    consumer for its O): a descriptor written by one warp and used by another would need a
    tensormap acquire fence in the user, which the partitions do not issue.
    """

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
    seq_len: gl.tensor
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
        seq_len,
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
        self.seq_len = seq_len
        self.key_blocks = key_blocks
        self.qk_scale = qk_scale
        self.CAUSAL = gl.constexpr(CAUSAL)


@gluon.jit
def _head_descriptor(base, seq_len, bufs):
    """A TMA descriptor over one head's [seq_len, HEAD_DIM] rows, in tiles shaped like ``bufs``' slots.

    Bounded by this sequence: rows past seq_len read as zeros and are dropped on store.
    """
    ROWS: gl.constexpr = bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = bufs.type.shape[2]
    return tma.make_tensor_descriptor(base, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [ROWS, HEAD_DIM], bufs.layout)


@gluon.jit
def _producer(sh: _Shared):
    """One warp: both consumers' Q tiles, then K_j and V_j into the ring, as stages free up."""
    NUM_STAGES: gl.constexpr = sh.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = sh.k_bufs.type.shape[1]
    q_desc = _head_descriptor(sh.q_base, sh.seq_len, sh.q_bufs)
    k_desc = _head_descriptor(sh.k_base, sh.seq_len, sh.k_bufs)
    v_desc = _head_descriptor(sh.v_base, sh.seq_len, sh.v_bufs)
    for w in gl.static_range(2):
        # The transaction count is the whole box: TMA writes zeros for rows past seq_len.
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
        # Only the diagonal block (causal) or the last, partial block (not causal) gets here;
        # every row keeps at least one key, so the new max is finite and exp2(-inf) = 0.
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if sh.CAUSAL:
            visible = gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1)
        else:
            visible = gl.expand_dims(cols < sh.seq_len, 0)
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
    # Key blocks that need a mask: from the one holding this warp group's first row (causal),
    # or the partial block at the end of the sequence (not causal).
    if sh.CAUSAL:  # noqa: SIM108 - constexpr branches read better in a kernel
        first_masked = row0 // BLOCK_N
    else:
        first_masked = sh.seq_len // BLOCK_N
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
    # first and is issued by one thread, so the count of 2 is one per consumer. No proxy fence:
    # the only readers were wgmmas (async proxy, like the TMA that will overwrite the stage).
    mbarrier.arrive(sh.k_empty.index(0), count=1)
    p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, rows, 0, sh, first_masked == 0, s_layout)
    p_prev = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)

    for j in range(1, sh.key_blocks):
        stage = j % NUM_STAGES
        prev = (j - 1) % NUM_STAGES
        # S_j = Q·K_jᵀ, asynchronously.
        mbarrier.wait(sh.k_ready.index(stage), (j // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(
            q_buf, sh.k_bufs.index(stage).permute((1, 0)), zeros_s, use_acc=False, is_async=True
        )
        # O += P_{j-1}·V_{j-1}, queued behind it. acc holds O rescaled to m_{j-1} (done at the end
        # of the previous iteration, after its wgmma finished).
        mbarrier.wait(sh.v_ready.index(prev), ((j - 1) // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_prev, sh.v_bufs.index(prev), acc, is_async=True)
        # wgmma groups complete in issue order: "at most 1 outstanding" means S_j is done and
        # only P_{j-1}·V_{j-1} may still run. deps keep the operands' registers and buffers alive.
        s = warpgroup_mma_wait(1, deps=(s_tok, q_buf, sh.k_bufs.index(stage)))[0]
        mbarrier.arrive(sh.k_empty.index(stage), count=1)
        # The softmax of S_j overlaps the tensor core's P_{j-1}·V_{j-1}. p_new lands in fresh
        # registers: p_prev stays live (it is a dep of the wait below), so the in-flight wgmma
        # still reads its own A fragment.
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
    # Q's buffer is free (the last wgmma that read it has completed): stage O there and let TMA
    # store it; the descriptor is bounded by seq_len, so rows past the sequence are dropped.
    q_buf.store(out.to(dtype))
    # Order the generic-proxy stores before the async-proxy (TMA) read of the buffer.
    fence_async_shared()
    o_desc = _head_descriptor(sh.o_base, sh.seq_len, sh.q_bufs)
    tma.async_copy_shared_to_global(o_desc, [row0, 0], q_buf)
    tma.store_wait(pendings=0)


@gluon.jit
def _consumer_0(sh: _Shared):
    _consumer(sh, 0)


@gluon.jit
def _consumer_1(sh: _Shared):
    _consumer(sh, 1)


@gluon.jit
def _attention_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,  #
    qk_scale,
    seq_len,
    q_heads,
    group,  #
    CAUSAL: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr,
):
    gl.static_assert(BLOCK_M % BLOCK_N == 0 or BLOCK_N % BLOCK_M == 0)
    dtype: gl.constexpr = q_ptr.dtype.element_ty
    m_blocks = gl.cdiv(seq_len, BLOCK_M)
    m_block = gl.program_id(0)
    if CAUSAL:
        # The longest rows (last query blocks) start first, so short ones fill the tail of the launch.
        m_block = m_blocks - 1 - m_block
    seq_head = gl.program_id(1)
    seq = seq_head // q_heads
    kv_head = (seq_head % q_heads) // group
    kv_heads = q_heads // group
    head_elems = seq_len.to(gl.int64) * HEAD_DIM
    kv_offset = (seq * kv_heads + kv_head).to(gl.int64) * head_elems
    q_start = m_block * BLOCK_M
    if CAUSAL:
        key_blocks = gl.cdiv(gl.minimum(q_start + BLOCK_M, seq_len), BLOCK_N)
    else:
        key_blocks = gl.cdiv(seq_len, BLOCK_N)

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
        q_ptr + seq_head.to(gl.int64) * head_elems,
        k_ptr + kv_offset,
        v_ptr + kv_offset,
        o_ptr + seq_head.to(gl.int64) * head_elems,
        q_bufs,
        k_bufs,
        v_bufs,
        q_ready,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        gl.to_tensor(q_start),
        gl.to_tensor(seq_len),
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


# ---- the persistent Hopper path ------------------------------------------------------------


@aggregate
class _Persist:
    """What the persistent kernel's partitions share: descriptors over the flattened heads, buffers,
    barriers, the problem. Every partition walks the same tiles in the same order."""

    q_desc: tma.tensor_descriptor
    k_desc: tma.tensor_descriptor
    v_desc: tma.tensor_descriptor
    o_desc: tma.tensor_descriptor
    q_bufs: gl.shared_memory_descriptor
    o_bufs: gl.shared_memory_descriptor
    k_bufs: gl.shared_memory_descriptor
    v_bufs: gl.shared_memory_descriptor
    q_ready: gl.shared_memory_descriptor
    q_empty: gl.shared_memory_descriptor
    k_ready: gl.shared_memory_descriptor
    v_ready: gl.shared_memory_descriptor
    k_empty: gl.shared_memory_descriptor
    v_empty: gl.shared_memory_descriptor
    seq_len: gl.tensor
    q_heads: gl.tensor
    group: gl.tensor
    num_tiles: gl.tensor
    qk_scale: gl.tensor
    CAUSAL: gl.constexpr
    HEAD_GROUP: gl.constexpr

    @gluon.constexpr_function
    def __init__(
        self,
        q_desc,
        k_desc,
        v_desc,
        o_desc,
        q_bufs,
        o_bufs,
        k_bufs,
        v_bufs,
        q_ready,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        seq_len,
        q_heads,
        group,
        num_tiles,
        qk_scale,
        CAUSAL,
        HEAD_GROUP,
    ):
        self.q_desc = q_desc
        self.k_desc = k_desc
        self.v_desc = v_desc
        self.o_desc = o_desc
        self.q_bufs = q_bufs
        self.o_bufs = o_bufs
        self.k_bufs = k_bufs
        self.v_bufs = v_bufs
        self.q_ready = q_ready
        self.q_empty = q_empty
        self.k_ready = k_ready
        self.v_ready = v_ready
        self.k_empty = k_empty
        self.v_empty = v_empty
        self.seq_len = seq_len
        self.q_heads = q_heads
        self.group = group
        self.num_tiles = num_tiles
        self.qk_scale = qk_scale
        self.CAUSAL = gl.constexpr(CAUSAL)
        self.HEAD_GROUP = gl.constexpr(HEAD_GROUP)


@gluon.jit
def _tile(ps: _Persist, tile):
    """Tile ``tile``'s first query row (flattened), first key row (flattened), query start within
    its sequence and number of key blocks. Tiles run head by head; within a head, causal tiles
    go longest first."""
    BLOCK_N: gl.constexpr = ps.k_bufs.type.shape[1]
    m_blocks = ps.seq_len // BLOCK_M
    if ps.CAUSAL:
        # Heads in groups of HEAD_GROUP (the last group may be smaller); inside a group the
        # heads' tiles interleave, longest first: the group's last query blocks, then the ones
        # before them. Only the order of the walk; a tile's work is the same.
        span = ps.HEAD_GROUP * m_blocks
        first = (tile // span) * ps.HEAD_GROUP
        heads_here = gl.minimum(ps.num_tiles // m_blocks - first, ps.HEAD_GROUP)
        rank = tile % span
        seq_head = first + rank % heads_here
        m_block = m_blocks - 1 - rank // heads_here
    else:
        seq_head = tile // m_blocks
        m_block = tile % m_blocks
    seq = seq_head // ps.q_heads
    kv_heads = ps.q_heads // ps.group
    kv_head = (seq_head % ps.q_heads) // ps.group
    q_start = m_block * BLOCK_M
    q_row = seq_head * ps.seq_len + q_start
    kv_row = (seq * kv_heads + kv_head) * ps.seq_len
    if ps.CAUSAL:  # noqa: SIM108 - constexpr branches read better in a kernel
        key_blocks = gl.cdiv(q_start + BLOCK_M, BLOCK_N)
    else:
        key_blocks = ps.seq_len // BLOCK_N
    return q_row, kv_row, q_start, key_blocks


@gluon.jit
def _p_producer(ps: _Persist):
    """One warp: for each tile of this program, both consumers' Q (once their previous Q is
    released), then K_j and V_j into the ring. The ring's counter runs on across tiles."""
    NUM_STAGES: gl.constexpr = ps.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = ps.k_bufs.type.shape[1]
    done = 0  # tiles this program finished
    ring = 0  # key blocks streamed so far, all tiles
    for tile in range(gl.program_id(0), ps.num_tiles, gl.num_programs(0)):
        q_row, kv_row, _q_start, key_blocks = _tile(ps, tile)
        for w in gl.static_range(2):
            # Consumer w releases its Q buffer after its last Q·Kᵀ of the previous tile.
            mbarrier.wait(ps.q_empty.index(w), (done & 1) ^ 1)
            mbarrier.expect(ps.q_ready.index(w), ps.q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                ps.q_desc, [q_row + w * ROWS_PER_CONSUMER, 0], ps.q_ready.index(w), ps.q_bufs.index(w)
            )
        for j in range(key_blocks):
            g = ring + j
            stage = g % NUM_STAGES
            free_phase = ((g // NUM_STAGES) & 1) ^ 1
            mbarrier.wait(ps.k_empty.index(stage), free_phase)
            mbarrier.expect(ps.k_ready.index(stage), ps.k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                ps.k_desc, [kv_row + j * BLOCK_N, 0], ps.k_ready.index(stage), ps.k_bufs.index(stage)
            )
            mbarrier.wait(ps.v_empty.index(stage), free_phase)
            mbarrier.expect(ps.v_ready.index(stage), ps.v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                ps.v_desc, [kv_row + j * BLOCK_N, 0], ps.v_ready.index(stage), ps.v_bufs.index(stage)
            )
        ring += key_blocks
        done += 1  # noqa: SIM113 - a Gluon loop over a strided range


@gluon.jit
def _p_softmax(s, m_i, l_i, rows, start_n, qk_scale, masked, CAUSAL: gl.constexpr, s_layout: gl.constexpr):
    """The bundled kernel's online softmax step (the sequence length is a multiple of BLOCK_N
    here, so only the causal diagonal is ever masked)."""
    BLOCK_N: gl.constexpr = s.shape[1]
    if CAUSAL:  # noqa: SIM102 - a constexpr test, then a runtime one
        if masked:
            cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
            s = gl.where(gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1), s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_new


@gluon.jit
def _p_consumer(ps: _Persist, WARP_GROUP: gl.constexpr):
    """Rows [64·WARP_GROUP, +64) of each tile of this program: the bundled consumer's loop, per
    tile, with the ring's stage and phase taken from a counter that runs on across tiles."""
    NUM_STAGES: gl.constexpr = ps.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = ps.k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = ps.k_bufs.type.shape[2]
    dtype: gl.constexpr = ps.k_bufs.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s_rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
    q_buf = ps.q_bufs.index(WARP_GROUP)
    o_buf = ps.o_bufs.index(WARP_GROUP)
    zeros_s = gl.zeros([ROWS_PER_CONSUMER, BLOCK_N], gl.float32, layout=s_layout)

    done = 0
    ring = 0
    for tile in range(gl.program_id(0), ps.num_tiles, gl.num_programs(0)):
        q_row, _kv_row, q_start, key_blocks = _tile(ps, tile)
        row0 = q_start + WARP_GROUP * ROWS_PER_CONSUMER
        rows = row0 + gl.arange(0, ROWS_PER_CONSUMER, layout=s_rows)
        # Causal: blocks from the one holding this warp group's first row need the mask.
        first_masked = row0 // BLOCK_N
        m_i = gl.full([ROWS_PER_CONSUMER], float("-inf"), gl.float32, layout=s_rows)
        l_i = gl.zeros([ROWS_PER_CONSUMER], gl.float32, layout=s_rows)
        acc = gl.zeros([ROWS_PER_CONSUMER, HEAD_DIM], gl.float32, layout=o_layout)

        mbarrier.wait(ps.q_ready.index(WARP_GROUP), done & 1)
        stage = ring % NUM_STAGES
        mbarrier.wait(ps.k_ready.index(stage), (ring // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(
            q_buf, ps.k_bufs.index(stage).permute((1, 0)), zeros_s, use_acc=False, is_async=True
        )
        s = warpgroup_mma_wait(0, deps=(s_tok, q_buf, ps.k_bufs.index(stage)))[0]
        mbarrier.arrive(ps.k_empty.index(stage), count=1)
        p, alpha, m_i, l_i = _p_softmax(
            s, m_i, l_i, rows, 0, ps.qk_scale, first_masked == 0, ps.CAUSAL, s_layout
        )
        p_prev = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)

        for j in range(1, key_blocks):
            g = ring + j
            stage = g % NUM_STAGES
            prev = (g - 1) % NUM_STAGES
            mbarrier.wait(ps.k_ready.index(stage), (g // NUM_STAGES) & 1)
            s_tok = warpgroup_mma(
                q_buf, ps.k_bufs.index(stage).permute((1, 0)), zeros_s, use_acc=False, is_async=True
            )
            mbarrier.wait(ps.v_ready.index(prev), ((g - 1) // NUM_STAGES) & 1)
            acc_tok = warpgroup_mma(p_prev, ps.v_bufs.index(prev), acc, is_async=True)
            s = warpgroup_mma_wait(1, deps=(s_tok, q_buf, ps.k_bufs.index(stage)))[0]
            mbarrier.arrive(ps.k_empty.index(stage), count=1)
            p, alpha, m_i, l_i = _p_softmax(
                s, m_i, l_i, rows, j * BLOCK_N, ps.qk_scale, j >= first_masked, ps.CAUSAL, s_layout
            )
            p_new = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)
            acc, p_prev, _ = warpgroup_mma_wait(0, deps=(acc_tok, p_prev, ps.v_bufs.index(prev)))
            mbarrier.arrive(ps.v_empty.index(prev), count=1)
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, o_rows, assert_trivial=True), 1)
            p_prev = p_new

        # Every wgmma that read Q has completed: the producer may load the next tile's Q.
        mbarrier.arrive(ps.q_empty.index(WARP_GROUP), count=1)
        g = ring + key_blocks - 1
        last = g % NUM_STAGES
        mbarrier.wait(ps.v_ready.index(last), (g // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_prev, ps.v_bufs.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc_tok, p_prev, ps.v_bufs.index(last)))[0]
        mbarrier.arrive(ps.v_empty.index(last), count=1)

        out = acc / gl.expand_dims(gl.convert_layout(l_i, o_rows, assert_trivial=True), 1)
        # The previous tile's store must have read O's buffer before it is overwritten.
        tma.store_wait(pendings=0)
        o_buf.store(out.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(ps.o_desc, [q_row + WARP_GROUP * ROWS_PER_CONSUMER, 0], o_buf)
        ring += key_blocks
        done += 1  # noqa: SIM113 - a Gluon loop over a strided range
    tma.store_wait(pendings=0)


@gluon.jit
def _p_consumer_0(ps: _Persist):
    _p_consumer(ps, 0)


@gluon.jit
def _p_consumer_1(ps: _Persist):
    _p_consumer(ps, 1)


@gluon.jit
def _attention_persistent(
    q_desc,
    k_desc,
    v_desc,
    o_desc,  #
    qk_scale,
    seq_len,
    q_heads,
    group,
    num_tiles,  #
    CAUSAL: gl.constexpr,
    HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr,
    NUM_STAGES: gl.constexpr,
    HEAD_GROUP: gl.constexpr,
):
    dtype: gl.constexpr = q_desc.dtype
    q_layout: gl.constexpr = q_desc.layout
    kv_layout: gl.constexpr = k_desc.layout
    q_bufs = gl.allocate_shared_memory(dtype, [2, ROWS_PER_CONSUMER, HEAD_DIM], q_layout)
    o_bufs = gl.allocate_shared_memory(dtype, [2, ROWS_PER_CONSUMER, HEAD_DIM], q_layout)
    k_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for w in gl.static_range(2):
        mbarrier.init(q_ready.index(w), count=1)
        mbarrier.init(q_empty.index(w), count=1)  # one arrive: consumer w's
    for s in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)
        mbarrier.init(v_empty.index(s), count=2)
    fence_async_shared()
    ps = _Persist(
        q_desc,
        k_desc,
        v_desc,
        o_desc,
        q_bufs,
        o_bufs,
        k_bufs,
        v_bufs,
        q_ready,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        gl.to_tensor(seq_len),
        gl.to_tensor(q_heads),
        gl.to_tensor(group),
        gl.to_tensor(num_tiles),
        gl.to_tensor(qk_scale),
        CAUSAL,
        HEAD_GROUP,
    )
    gl.warp_specialize(
        [
            (_p_consumer_0, (ps,)),
            (_p_consumer_1, (ps,)),
            (_p_producer, (ps,)),
        ],
        [4, 1],
        [_CONSUMER_REGS, _PRODUCER_REGS],
    )


_SMS: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SMS:
        _SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SMS[index]


def _persistent_ok(q: torch.Tensor) -> bool:
    """Sequences that are whole query and key tiles (every SPEC prefill shape)."""
    block_n, _ = _TILES[q.shape[-1]]
    return q.shape[2] % BLOCK_M.value == 0 and q.shape[2] % block_n == 0


def _persistent_forward(q, k, v, causal, sm_scale):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    batch, q_heads, seq_len, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = torch.empty_like(q)
    block_n, num_stages = _TILES[head_dim]
    gdtype = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    q_layout = gl.NVMMASharedLayout.get_default_for([ROWS_PER_CONSUMER.value, head_dim], gdtype)
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, head_dim], gdtype)
    rows = ROWS_PER_CONSUMER.value

    def desc(x, block, layout):
        return TensorDescriptor.from_tensor(x.view(-1, head_dim), [block, head_dim], layout)

    num_tiles = (seq_len // BLOCK_M.value) * batch * q_heads
    # One program per SM (shared memory allows one), each walking tiles p, p + P, ...: which
    # program runs a tile changes with the batch, the tile's arithmetic does not.
    grid = (min(num_tiles, _sm_count(q.device)),)
    _attention_persistent[grid](
        desc(q, rows, q_layout),
        desc(k, block_n, kv_layout),
        desc(v, block_n, kv_layout),
        desc(o, rows, q_layout),  #
        sm_scale * LOG2E,
        seq_len,
        q_heads,
        q_heads // kv_heads,
        num_tiles,  #
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_N=block_n,
        NUM_STAGES=num_stages,  #
        HEAD_GROUP=CAUSAL_HEAD_GROUP,
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
    qk_scale,
    seq_len,
    q_heads,
    group,
    CAUSAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    m_block = tl.program_id(0)
    seq_head = tl.program_id(1)
    seq = seq_head // q_heads
    q_head = seq_head % q_heads
    kv_head = q_head // group
    kv_heads = q_heads // group
    q_base = q_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM
    kv_offset = (seq * kv_heads + kv_head).to(tl.int64) * seq_len * HEAD_DIM

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Causal rows never look past their own block: stop at its end.
    hi = seq_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        # K is read transposed ([HEAD_DIM, BLOCK_N]) so that Q·Kᵀ is one tl.dot.
        k = tl.load(
            k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0
        )
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
        # Every row sees key 0 in the first tile, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(
            v_ptr + kv_offset + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0
        )
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    o_base = o_ptr + seq_head.to(tl.int64) * seq_len * HEAD_DIM
    tl.store(
        o_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


# ---- the Hopper path ---------------------------------------------------------------------


def _hopper_forward(q, k, v, causal, sm_scale):
    batch, q_heads, seq_len, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = torch.empty_like(q)
    block_n, num_stages = _TILES[head_dim]
    # Set on every call: the allocator lives in a context variable, which a worker thread would
    # not inherit from the importing one.
    triton.set_allocator(_descriptor_scratch)
    grid = (triton.cdiv(seq_len, BLOCK_M.value), batch * q_heads)
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
        BLOCK_N=block_n,
        NUM_STAGES=num_stages,  #
        num_warps=4,
        maxnreg=_LAUNCH_MAXNREG,
    )
    return o


def _portable_forward(q, k, v, causal, sm_scale):
    batch, q_heads, seq_len, head_dim = q.shape
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
    num_warps = 8 if head_dim >= 64 else 4
    grid = (triton.cdiv(seq_len, block_m), batch * q_heads)
    _flash_forward[grid](
        q,
        k,
        v,
        o,
        sm_scale * LOG2E,
        seq_len,
        q_heads,
        q_heads // kv_heads,
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=num_warps,
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


def kernel(q, k, v, causal, sm_scale):
    if _hopper_path(q):
        if _persistent_ok(q):
            return _persistent_forward(q, k, v, causal, sm_scale)
        return _hopper_forward(q, k, v, causal, sm_scale)
    return _portable_forward(q, k, v, causal, sm_scale)
