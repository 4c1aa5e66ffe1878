"""VIOLATES batch invariance: the chunk size follows the batch's total token count.

The kernel recovers each token's per-channel decay from a chunk-local
cumulative sum of the log-decays (``exp(G_t − G_{t−1})``, G restarting at each
chunk), as chunked KDA kernels do. The chunk is chosen from ``B·T``: 8 tokens
for small batches, 16 for larger ones. Where the chunks restart changes the
rounding of the decays and so of every later output: a sequence's output
depends on how many tokens its batch holds.
"""

import torch
import triton
import triton.language as tl

# State elements per program (LANES × Dk × BLOCK_V); wide heads get one lane per program.
STATE_ELEMENTS = 4096
MAX_BLOCK_V = 32
# Tokens per chunk of the gate's cumulative sum: short batches get short chunks.
SHORT_CHUNK = 8
LONG_CHUNK = 16
LONG_CHUNK_FROM_TOKENS = 128


@triton.jit
def _kda_recurrent(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    n_lanes,
    seq_len,
    n_heads,
    scale,
    chunk,
    DK: tl.constexpr,
    DV: tl.constexpr,
    LANES: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    lanes = tl.program_id(0) * LANES + tl.arange(0, LANES)
    lane_ok = lanes < n_lanes
    seq = (lanes // n_heads).to(tl.int64)
    head = lanes % n_heads
    dks = tl.arange(0, DK)
    vs = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    # Offsets of token 0 of each lane; one token further is n_heads heads further.
    beta_offs = seq * seq_len * n_heads + head
    qk_offs = beta_offs[:, None] * DK + dks[None, :]
    v_offs = beta_offs[:, None] * DV + vs[None, :]
    qk_mask = lane_ok[:, None]
    v_mask = lane_ok[:, None] & (vs[None, :] < DV)
    state = tl.full([LANES, DK, BLOCK_V], 0, tl.float32)
    # The per-channel log-decay summed since the current chunk began.
    chunk_sum = tl.full([LANES, DK], 0, tl.float32)
    for t in range(seq_len):
        q = tl.load(q_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + v_offs, mask=v_mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + qk_offs, mask=qk_mask, other=0.0)
        beta = tl.load(beta_ptr + beta_offs, mask=lane_ok, other=0.0)
        summed = chunk_sum + g
        state = state * tl.exp(summed - chunk_sum)[:, :, None]
        chunk_sum = summed
        predicted = tl.sum(k[:, :, None] * state, axis=1)
        u = beta[:, None] * (v - predicted)
        state = state + k[:, :, None] * u[:, None, :]
        o = tl.sum(q[:, :, None] * state, axis=1) * scale
        tl.store(o_ptr + v_offs, o.to(o_ptr.dtype.element_ty), mask=v_mask)
        # The chunk ends every `chunk` tokens of this sequence: its gate sum starts over.
        chunk_sum = tl.where((t + 1) % chunk == 0, 0.0, chunk_sum)
        beta_offs += n_heads
        qk_offs += n_heads * DK
        v_offs += n_heads * DV


def kernel(q, k, v, g, beta, scale):
    batch, seq_len, n_heads, dk = q.shape
    dv = v.shape[-1]
    if dk != triton.next_power_of_2(dk):
        raise ValueError(f"Dk={dk} must be a power of two")
    block_v = min(triton.next_power_of_2(dv), MAX_BLOCK_V)
    lanes = max(1, STATE_ELEMENTS // (dk * block_v))
    # Short batches get short chunks (more, smaller work items to spread); long ones longer
    # chunks (fewer restarts of the gate sum).
    chunk = SHORT_CHUNK if batch * seq_len < LONG_CHUNK_FROM_TOKENS else LONG_CHUNK
    o = torch.empty_like(v)
    n_lanes = batch * n_heads
    grid = (triton.cdiv(n_lanes, lanes), triton.cdiv(dv, block_v))
    _kda_recurrent[grid](
        q,
        k,
        v,
        g,
        beta,
        o,
        n_lanes,
        seq_len,
        n_heads,
        scale,
        chunk,
        DK=dk,
        DV=dv,
        LANES=lanes,
        BLOCK_V=block_v,
        num_warps=4,
    )
    return o
