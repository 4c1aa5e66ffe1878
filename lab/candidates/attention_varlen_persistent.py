"""Ragged prefill on Hopper, persistent: ``attention_varlen_gluon``'s per-tile Gluon forward (TMA,
mbarriers, async wgmma, a producer warp, per-(sequence, head) descriptors built on the device),
with one program per SM walking the work items instead of one program per item; the seed's flash
forward everywhere else.

Two paths; which one runs depends on the device, the dtype and the head dim only (never on the
pack):

- **persistent** (``_varlen_persistent``; Hopper, bf16/fp16, head dim 64/128): P = min(SMs, an
  upper bound of the items) programs; program p takes the items p, p + P, p + 2P, … An item is
  128 query rows of one (sequence, query head), split between two consumer warp groups of 64
  rows, fed by one producer warp that streams the sequence's K and V tiles through a
  NUM_STAGES-deep ring;
- **portable** (``_flash_forward``, the seed's kernel): fp32 (the gate's probe), other head dims,
  GPUs before Hopper and the CPU interpreter.

**Items.** ``_plan_tiles`` lists the query tiles sequence by sequence, one slot per tile with
what an item needs of its sequence (where its queries and keys start, their lengths, the query
block), and writes the number of tiles after the list. Item w is (KV head, tile, query head of
the group), query head fastest: the per-tile candidate's program order. The group's query heads
read one tile's K and V side by side and one KV head's tiles follow each other, so its K and V
stay in L2 while they are swept. Items are numbered over the listed tiles only, so the P
programs share Hq · tiles items; a program past the last item does nothing. Causal tiles run
longest first within a sequence (query blocks reversed).

**What persistence buys.** Barriers are set up once per program, not once per item. Each
consumer has two Q buffers, used by alternate items: the producer loads the next item's Q while
the consumers still work on the current one, and streams the next item's K and V into the ring
as stages free up (the ring's stage and phase come from a counter that runs on across items:
``ring``, key blocks streamed so far). A consumer stages its O in the Q buffer its item just
finished with and stores it by TMA; it hands that buffer back (``q_empty``) during its next item,
once the store has read it, so the store overlaps the next item's first blocks. A consumer reads
its next item's slot from the tile list while it works on the current one. Shared memory: Q
2·2·64·D, K and V NUM_STAGES·BLOCK_N·D each: 192 KB at D = 128, 128 KB at D = 64.

Synchronisation, per program; consumer c's n-th item uses Q buffer 2c + n % 2 (every wait and
arrive is commented where it happens):
    q_ready[2c+b]  producer → consumer c   Q landed; use u = n // 2 of buffer b waits parity u & 1
    q_empty[2c+b]  consumer c → producer   Q buffer b free again: its last Q·Kᵀ and O store done
    k_ready[s], v_ready[s]                 use g = ring + j of stage g % NUM_STAGES landed
    k_empty[s], v_empty[s]                 both consumers' wgmmas finished reading use g
A ready barrier's use u waits parity u & 1, the producer the opposite parity on the empty one (a
fresh barrier counts as having completed phase 1, so the first round passes).

**Descriptors per (sequence, head)**, built on the device in the partition that uses them (the
producer for Q, K, V, each consumer for its O), as in the per-tile candidate: base
``q + (start · Hq + head) · D``, shape ``[len, D]``, row stride ``Hq · D`` (``Hkv · D`` for K
and V). Rows past the sequence's end read as zeros and are dropped on store: nothing of a
batchmate is read or written. A descriptor lives in 128 bytes of global scratch per call site
and program, and TMA reads it when the copy runs, so a rewrite must wait for the copies that use
the old one. The producer keeps two sets (its loop is unrolled by two: one call site per item
parity) and writes item n's set once both consumers have handed back item n − 2's Q buffers,
which they do during item n − 1, after consuming all of item n − 2: every copy that used the set
has landed. (Written before that wait, it would take three sets.) A consumer rewrites its O
descriptor after ``store_wait(0)`` on its previous store, while its first Q·Kᵀ runs.

**Keys ahead of the queries.** Query i of a sequence sees keys up to ``i + k_len − q_len``
(bottom-right, as FlashAttention aligns a causal mask). The task's inputs have ``k_len = q_len``.

Batch invariance: the tile shape, the stage count, the key order (blocks 0, 1, …, BLOCK_N keys
each) and the masked blocks depend on the head dim, causality, the dtype and the sequence's own
lengths. A row's arithmetic is the per-tile candidate's, the same sequence of MMAs and softmax
steps wherever the sequence sits in the pack and whatever its batchmates are; how many programs
run and which one takes an item change with the batch, what an item computes does not. No
split-KV, no atomics.
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
# Rows per consumer warp group: wgmma's M with 4 warps; two consumers per item.
ROWS_PER_CONSUMER = gl.constexpr(64)
BLOCK_M = gl.constexpr(128)
# Fields per slot of the tile list: first query token, query length, first key token, key length,
# query block.
_FIELDS = gl.constexpr(5)

# head_dim -> (BLOCK_N, NUM_STAGES), the per-tile candidate's tiles. D=128: 2 × 32 KB of Q
# buffers plus 2 × 64 KB of K/V stages.
_TILES = {128: (128, 2), 64: (128, 3)}
# Registers per thread: the producer warp gives most of its share to the consumers.
_PRODUCER_REGS = gl.constexpr(24)
_CONSUMER_REGS = gl.constexpr(240)
_LAUNCH_MAXNREG = 168  # 65536 registers / (3 warp groups × 128 threads), rounded down to 8

# The per-tile candidate's knobs, less D = 128's third stage: with the second Q buffers it would
# need 256 KB of shared memory.
KNOBS = {
    "_TILES[64][1]": (2, 3, 4),
}
ORDER_KNOBS = {
    "_TILES[128][0]": (64, 128),
    "_TILES[64][0]": (64, 128),
}


@aggregate
class _Persist:
    """What the three partitions share: the tensors, the tile list, buffers, barriers. Every
    partition walks the same items in the same order and decodes each one itself."""

    q_ptr: gl.tensor
    k_ptr: gl.tensor
    v_ptr: gl.tensor
    o_ptr: gl.tensor
    tiles_ptr: gl.tensor
    q_bufs: gl.shared_memory_descriptor
    k_bufs: gl.shared_memory_descriptor
    v_bufs: gl.shared_memory_descriptor
    q_ready: gl.shared_memory_descriptor
    q_empty: gl.shared_memory_descriptor
    k_ready: gl.shared_memory_descriptor
    v_ready: gl.shared_memory_descriptor
    k_empty: gl.shared_memory_descriptor
    v_empty: gl.shared_memory_descriptor
    n_slots: gl.tensor
    n_tiles: gl.tensor
    n_items: gl.tensor
    q_heads: gl.tensor
    group: gl.tensor
    qk_scale: gl.tensor
    CAUSAL: gl.constexpr

    @gluon.constexpr_function
    def __init__(
        self,
        q_ptr,
        k_ptr,
        v_ptr,
        o_ptr,
        tiles_ptr,
        q_bufs,
        k_bufs,
        v_bufs,
        q_ready,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        n_slots,
        n_tiles,
        n_items,
        q_heads,
        group,
        qk_scale,
        CAUSAL,
    ):
        self.q_ptr = q_ptr
        self.k_ptr = k_ptr
        self.v_ptr = v_ptr
        self.o_ptr = o_ptr
        self.tiles_ptr = tiles_ptr
        self.q_bufs = q_bufs
        self.k_bufs = k_bufs
        self.v_bufs = v_bufs
        self.q_ready = q_ready
        self.q_empty = q_empty
        self.k_ready = k_ready
        self.v_ready = v_ready
        self.k_empty = k_empty
        self.v_empty = v_empty
        self.n_slots = n_slots
        self.n_tiles = n_tiles
        self.n_items = n_items
        self.q_heads = q_heads
        self.group = group
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
def _fields(ps: _Persist, w):
    """Item ``w``'s slot of the tile list: first query token, query length, first key token, key
    length, query block. Five independent loads; the slot is in the list for any ``w`` (an item
    past the last one reads a valid slot whose values go unused)."""
    slot = (w // ps.group) % gl.maximum(ps.n_tiles, 1)
    row = ps.tiles_ptr + slot
    q_tok = gl.load(row)
    q_len = gl.load(row + ps.n_slots)
    k_tok = gl.load(row + 2 * ps.n_slots)
    k_len = gl.load(row + 3 * ps.n_slots)
    m_block = gl.load(row + 4 * ps.n_slots)
    return q_tok, q_len, k_tok, k_len, m_block


@gluon.jit
def _derive(ps: _Persist, w, q_tok, q_len, k_tok, k_len, m_block):
    """Item ``w`` from its slot's fields: the element offsets of its query rows (q and o) and key
    rows (k and v), its first query row within the sequence and its key blocks. The per-tile
    candidate's program ``(kv_head, slot, member)``, computed the same way."""
    BLOCK_N: gl.constexpr = ps.k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = ps.k_bufs.type.shape[2]
    member = w % ps.group
    kv_head = w // (ps.group * ps.n_tiles)
    q_head = kv_head * ps.group + member
    if ps.CAUSAL:
        # A sequence's longest rows (its last query blocks) come first.
        m_block = gl.cdiv(q_len, BLOCK_M) - 1 - m_block
    q_start = m_block * BLOCK_M
    if ps.CAUSAL:
        key_blocks = gl.cdiv(gl.minimum(q_start + BLOCK_M + (k_len - q_len), k_len), BLOCK_N)
    else:
        key_blocks = gl.cdiv(k_len, BLOCK_N)
    # At least one block whenever k_len ≥ 1 and q_len ≤ k_len (every input of the task); the
    # floor keeps the producer and the consumers in step on degenerate lengths, where a walk of no
    # blocks would leave the consumers waiting for a K tile that never comes.
    key_blocks = gl.maximum(key_blocks, 1)
    q_offset = q_tok.to(gl.int64) * (ps.q_heads * HEAD_DIM) + q_head * HEAD_DIM
    kv_offset = k_tok.to(gl.int64) * ((ps.q_heads // ps.group) * HEAD_DIM) + kv_head * HEAD_DIM
    return q_offset, kv_offset, q_start, key_blocks


@gluon.jit
def _produce_item(ps: _Persist, w, done, ring):
    """Item ``w`` (this program's ``done``-th): once both consumers have handed back its Q buffers,
    its descriptors and both consumers' Q, then K_j and V_j into the ring from use ``ring`` on.
    Returns the ring's count after the item."""
    NUM_STAGES: gl.constexpr = ps.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = ps.k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = ps.k_bufs.type.shape[2]
    q_tok, q_len, k_tok, k_len, m_block = _fields(ps, w)
    q_offset, kv_offset, q_start, key_blocks = _derive(ps, w, q_tok, q_len, k_tok, k_len, m_block)
    slot = done & 1
    for c in gl.static_range(2):
        # Use done // 2 of consumer c's buffer for this parity waits for the release of use
        # done // 2 − 1 (item done − 2: its last Q·Kᵀ and its O store, handed back during item
        # done − 1); a fresh barrier lets the first use through.
        mbarrier.wait(ps.q_empty.index(2 * c + slot), ((done >> 1) & 1) ^ 1)
    # Both consumers have finished item done − 2, so every copy that used this call site's
    # descriptors (the caller unrolls by two: one set per parity) has landed: rewrite them.
    q_stride = ps.q_heads * HEAD_DIM
    k_stride = (ps.q_heads // ps.group) * HEAD_DIM
    q_desc = _rows_descriptor(ps.q_ptr + q_offset, q_len, q_stride, ps.q_bufs)
    k_desc = _rows_descriptor(ps.k_ptr + kv_offset, k_len, k_stride, ps.k_bufs)
    v_desc = _rows_descriptor(ps.v_ptr + kv_offset, k_len, k_stride, ps.v_bufs)
    for c in gl.static_range(2):
        buf = 2 * c + slot
        # The transaction count is the whole box: TMA writes zeros for rows past q_len.
        mbarrier.expect(ps.q_ready.index(buf), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            q_desc, [q_start + c * ROWS_PER_CONSUMER, 0], ps.q_ready.index(buf), ps.q_bufs.index(buf)
        )
    for j in range(key_blocks):
        g = ring + j
        stage = g % NUM_STAGES
        # Use g of a stage waits for the consumers' release of use g − NUM_STAGES, which may belong
        # to the previous item: this item's first blocks stream in while that one finishes.
        free_phase = ((g // NUM_STAGES) & 1) ^ 1
        # K first: a consumer's Q·Kᵀ can start while V is still in flight.
        mbarrier.wait(ps.k_empty.index(stage), free_phase)
        mbarrier.expect(ps.k_ready.index(stage), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            k_desc, [j * BLOCK_N, 0], ps.k_ready.index(stage), ps.k_bufs.index(stage)
        )
        mbarrier.wait(ps.v_empty.index(stage), free_phase)
        mbarrier.expect(ps.v_ready.index(stage), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            v_desc, [j * BLOCK_N, 0], ps.v_ready.index(stage), ps.v_bufs.index(stage)
        )
    return ring + key_blocks


@gluon.jit
def _producer(ps: _Persist):
    """One warp: this program's items p, p + P, …, two per turn of the loop, so that each item
    parity has its own descriptor call sites (see ``_produce_item``)."""
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    done = 0  # items this program has started
    ring = 0  # key blocks streamed so far, all items
    for first in range(pid, ps.n_items, 2 * programs):
        ring = _produce_item(ps, first, done, ring)
        done += 1
        if first + programs < ps.n_items:
            ring = _produce_item(ps, first + programs, done, ring)
            done += 1


@gluon.jit
def _softmax_block(
    s, m_i, l_i, rows, start_n, k_len, k_ahead, qk_scale, masked, CAUSAL: gl.constexpr, s_layout: gl.constexpr
):
    """Online softmax of one score block: P (fp32), the rescale factor, the updated max and sum.
    ``k_ahead`` is k_len − q_len (keys ahead of the queries)."""
    BLOCK_N: gl.constexpr = s.shape[1]
    if masked:
        # Only the blocks from the diagonal on (causal) or the last, partial block (not causal) get
        # here; every row of the sequence keeps at least one key, so the new max is finite and
        # exp2(-inf) = 0. Rows past the sequence's end see zeros past k_len and are not stored.
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:
            visible = gl.expand_dims(cols, 0) <= gl.expand_dims(rows + k_ahead, 1)
        else:
            visible = gl.expand_dims(cols < k_len, 0)
        s = gl.where(visible, s, float("-inf"))
    # max(x)·c == max(x·c) for c > 0, so the scale joins the subtraction as one FMA.
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, alpha, m_new, l_new


@gluon.jit
def _consumer(ps: _Persist, WARP_GROUP: gl.constexpr):
    """Rows [q_start + 64·WARP_GROUP, +64) of each item of this program: the per-tile candidate's
    loop (S_j and P_{j-1}·V_{j-1} overlapped), with the ring's stage and phase taken from a counter
    that runs on across items, Q in alternate buffers and O staged in the item's Q buffer."""
    NUM_STAGES: gl.constexpr = ps.k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = ps.k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = ps.k_bufs.type.shape[2]
    dtype: gl.constexpr = ps.k_bufs.dtype
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
    q_stride = ps.q_heads * HEAD_DIM
    zeros_s = gl.zeros([ROWS_PER_CONSUMER, BLOCK_N], gl.float32, layout=s_layout)
    pid = gl.program_id(0)
    programs = gl.num_programs(0)

    # The first item's slot; each item reads the next one's while it works.
    next_q_tok, next_q_len, next_k_tok, next_k_len, next_m_block = _fields(ps, pid)
    done = 0  # items this consumer has finished
    ring = 0  # key blocks consumed so far, all items
    for w in range(pid, ps.n_items, programs):
        q_tok = next_q_tok
        q_len = next_q_len
        k_tok = next_k_tok
        k_len = next_k_len
        m_block = next_m_block
        q_offset, _kv_offset, q_start, key_blocks = _derive(ps, w, q_tok, q_len, k_tok, k_len, m_block)
        next_q_tok, next_q_len, next_k_tok, next_k_len, next_m_block = _fields(ps, w + programs)
        k_ahead = k_len - q_len
        row0 = q_start + WARP_GROUP * ROWS_PER_CONSUMER
        rows = row0 + gl.arange(0, ROWS_PER_CONSUMER, layout=s_rows)
        # Key blocks that need a mask: from the one holding this warp group's first row's horizon
        # (causal), or the partial block at the end of the keys (not causal).
        if ps.CAUSAL:  # noqa: SIM108 - constexpr branches read better in a kernel
            first_masked = (row0 + k_ahead) // BLOCK_N
        else:
            first_masked = k_len // BLOCK_N
        m_i = gl.full([ROWS_PER_CONSUMER], float("-inf"), gl.float32, layout=s_rows)
        l_i = gl.zeros([ROWS_PER_CONSUMER], gl.float32, layout=s_rows)
        acc = gl.zeros([ROWS_PER_CONSUMER, HEAD_DIM], gl.float32, layout=o_layout)
        buf = 2 * WARP_GROUP + (done & 1)
        q_buf = ps.q_bufs.index(buf)

        # Block 0: S_0, softmax, nothing to overlap with yet.
        mbarrier.wait(ps.q_ready.index(buf), (done >> 1) & 1)
        stage = ring % NUM_STAGES
        mbarrier.wait(ps.k_ready.index(stage), (ring // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(
            q_buf, ps.k_bufs.index(stage).permute((1, 0)), zeros_s, use_acc=False, is_async=True
        )
        # While S_0 runs: the previous item's O store has read its staging buffer (that item's Q
        # buffer), which goes back to the producer, and the O descriptor, which is rewritten for
        # this item (bounded by q_len: rows past the sequence are dropped on store).
        tma.store_wait(pendings=0)
        if done > 0:
            mbarrier.arrive(ps.q_empty.index(buf ^ 1), count=1)
        o_desc = _rows_descriptor(ps.o_ptr + q_offset, q_len, q_stride, ps.q_bufs)
        s = warpgroup_mma_wait(0, deps=(s_tok, q_buf, ps.k_bufs.index(stage)))[0]
        # This warp group's wgmmas have read K of this use. The arrive synchronises the partition's
        # 4 warps first and is issued by one thread, so the count of 2 is one per consumer.
        mbarrier.arrive(ps.k_empty.index(stage), count=1)
        p, alpha, m_i, l_i = _softmax_block(
            s, m_i, l_i, rows, 0, k_len, k_ahead, ps.qk_scale, first_masked <= 0, ps.CAUSAL, s_layout
        )
        p_prev = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)

        for j in range(1, key_blocks):
            g = ring + j
            stage = g % NUM_STAGES
            prev = (g - 1) % NUM_STAGES
            # S_j = Q·K_jᵀ, asynchronously.
            mbarrier.wait(ps.k_ready.index(stage), (g // NUM_STAGES) & 1)
            s_tok = warpgroup_mma(
                q_buf, ps.k_bufs.index(stage).permute((1, 0)), zeros_s, use_acc=False, is_async=True
            )
            # O += P_{j-1}·V_{j-1}, queued behind it.
            mbarrier.wait(ps.v_ready.index(prev), ((g - 1) // NUM_STAGES) & 1)
            acc_tok = warpgroup_mma(p_prev, ps.v_bufs.index(prev), acc, is_async=True)
            # wgmma groups complete in issue order: "at most 1 outstanding" means S_j is done.
            s = warpgroup_mma_wait(1, deps=(s_tok, q_buf, ps.k_bufs.index(stage)))[0]
            mbarrier.arrive(ps.k_empty.index(stage), count=1)
            # The softmax of S_j overlaps the tensor core's P_{j-1}·V_{j-1}.
            p, alpha, m_i, l_i = _softmax_block(
                s,
                m_i,
                l_i,
                rows,
                j * BLOCK_N,
                k_len,
                k_ahead,
                ps.qk_scale,
                j >= first_masked,
                ps.CAUSAL,
                s_layout,
            )
            p_new = gl.convert_layout(p.to(dtype), p_layout, assert_trivial=True)
            acc, p_prev, _ = warpgroup_mma_wait(0, deps=(acc_tok, p_prev, ps.v_bufs.index(prev)))
            mbarrier.arrive(ps.v_empty.index(prev), count=1)
            # Rescale O from m_{j-1} to m_j before P_j·V_j is added to it.
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, o_rows, assert_trivial=True), 1)
            p_prev = p_new

        # The last block's P·V.
        g = ring + key_blocks - 1
        last = g % NUM_STAGES
        mbarrier.wait(ps.v_ready.index(last), (g // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_prev, ps.v_bufs.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc_tok, p_prev, ps.v_bufs.index(last)))[0]
        mbarrier.arrive(ps.v_empty.index(last), count=1)

        out = acc / gl.expand_dims(gl.convert_layout(l_i, o_rows, assert_trivial=True), 1)
        # Every wgmma that read this item's Q has completed: stage O in its buffer. The producer
        # reloads it only after the next item's arrive on q_empty, which follows the store.
        q_buf.store(out.to(dtype))
        # Order the generic-proxy stores before the async-proxy (TMA) read of the buffer.
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [row0, 0], q_buf)
        ring += key_blocks
        done += 1  # noqa: SIM113 - a Gluon loop over a strided range
    tma.store_wait(pendings=0)


@gluon.jit
def _consumer_0(ps: _Persist):
    _consumer(ps, 0)


@gluon.jit
def _consumer_1(ps: _Persist):
    _consumer(ps, 1)


@triton.jit
def _plan_tiles(
    cu_q_ptr, cu_k_ptr, tiles_ptr, n_slots, BLOCK_M: tl.constexpr, FIELDS: tl.constexpr, CHUNK: tl.constexpr
):
    """The list of query tiles, one slot each, stored field by field (``tiles[f · n_slots + t]``):
    the first query token of slot t's sequence, its query length, its first key token, its key
    length and the slot's query block; ``tiles[FIELDS · n_slots]`` is the number of tiles. Program
    s writes sequence s's blocks after those of sequences 0 … s−1, and the last program the count.
    Which program runs which tile never changes a tile's arithmetic."""
    s = tl.program_id(0)
    offs = tl.arange(0, CHUNK)
    before = 0
    for c in range(0, s, CHUNK):
        idx = c + offs
        ok = idx < s
        lo = tl.load(cu_q_ptr + idx, mask=ok, other=0)
        hi = tl.load(cu_q_ptr + idx + 1, mask=ok, other=0)
        before += tl.sum((hi - lo + BLOCK_M - 1) // BLOCK_M)
    q_tok = tl.load(cu_q_ptr + s)
    q_len = tl.load(cu_q_ptr + s + 1) - q_tok
    k_tok = tl.load(cu_k_ptr + s)
    k_len = tl.load(cu_k_ptr + s + 1) - k_tok
    blocks = (q_len + BLOCK_M - 1) // BLOCK_M
    zero = tl.full([CHUNK], 0, tl.int32)
    for c in range(0, blocks, CHUNK):
        idx = c + offs
        ok = idx < blocks
        at = tiles_ptr + before + idx
        tl.store(at, zero + q_tok, mask=ok)
        tl.store(at + n_slots, zero + q_len, mask=ok)
        tl.store(at + 2 * n_slots, zero + k_tok, mask=ok)
        tl.store(at + 3 * n_slots, zero + k_len, mask=ok)
        tl.store(at + 4 * n_slots, idx, mask=ok)
    if s == tl.num_programs(0) - 1:
        tl.store(tiles_ptr + FIELDS * n_slots, before + blocks)


@gluon.jit
def _varlen_persistent(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,  #
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
    n_tiles = gl.load(tiles_ptr + _FIELDS * n_slots)
    q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([ROWS_PER_CONSUMER, HEAD_DIM], dtype)
    kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, HEAD_DIM], dtype)
    # Q buffer 2c + b: consumer c's items of parity b (their O is staged there too).
    q_bufs = gl.allocate_shared_memory(dtype, [4, ROWS_PER_CONSUMER, HEAD_DIM], q_layout)
    k_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    v_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], kv_layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for b in gl.static_range(4):
        # Completed by the producer's expect (one arrive) plus the TMA's byte count.
        mbarrier.init(q_ready.index(b), count=1)
        mbarrier.init(q_empty.index(b), count=1)  # one arrive: the buffer's consumer's
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
    ps = _Persist(
        q_ptr,
        k_ptr,
        v_ptr,
        o_ptr,
        tiles_ptr,
        q_bufs,
        k_bufs,
        v_bufs,
        q_ready,
        q_empty,
        k_ready,
        v_ready,
        k_empty,
        v_empty,
        gl.to_tensor(n_slots),
        gl.to_tensor(n_tiles),
        gl.to_tensor(n_tiles * q_heads),
        gl.to_tensor(q_heads),
        gl.to_tensor(group),
        gl.to_tensor(qk_scale),
        CAUSAL,
    )
    # Default partition (num_warps = 4): consumer 0. Workers: consumer 1 (4 warps) and the
    # producer (1 warp), which hands its registers to the consumers.
    gl.warp_specialize(
        [
            (_consumer_0, (ps,)),
            (_consumer_1, (ps,)),
            (_producer, (ps,)),
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


_SMS: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SMS:
        _SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SMS[index]


def _hopper_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, sm_scale):
    _, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    q, k, v = _aligned(q), _aligned(k), _aligned(v)
    o = torch.empty_like(q)
    block_n, num_stages = _TILES[head_dim]
    # Set on every call: the allocator lives in a context variable, which a worker thread would
    # not inherit from the importing one.
    triton.set_allocator(_descriptor_scratch)
    n_seqs = cu_seqlens_q.shape[0] - 1
    if n_seqs <= 0:
        return o
    # Slots for every query tile without reading the lengths on the host: a sequence of n tokens
    # has at most n / BLOCK_M + 1 tiles (and an empty one none). The plan writes the tiles and,
    # after them, their count; slots past the count are never used.
    n_slots = triton.cdiv(q.shape[0], BLOCK_M.value) + n_seqs
    tiles = torch.empty(_FIELDS.value * n_slots + 1, dtype=torch.int32, device=q.device)
    _plan_tiles[(n_seqs,)](
        cu_seqlens_q.to(torch.int32),
        cu_seqlens_k.to(torch.int32),
        tiles,
        n_slots,
        BLOCK_M=BLOCK_M.value,
        FIELDS=_FIELDS.value,
        CHUNK=256,
    )
    # One program per SM (shared memory allows one), fewer when even every slot's items would
    # not fill them: which program runs an item changes with the batch, the item's arithmetic
    # does not.
    grid = (min(_sm_count(q.device), n_slots * q_heads),)
    _varlen_persistent[grid](
        q,
        k,
        v,
        o,  #
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
