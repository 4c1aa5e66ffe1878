"""VIOLATES batch invariance: chunks are cut from the packed token stream, not per sequence.

The kernel treats the batch as one packed stream of ``B·T`` tokens (the
variable-length layout) and cuts it into fixed chunks of 16, folding each
lane's accumulated decay into its state at every chunk end. A sequence that
starts mid-chunk gets its rescales at other offsets than the same sequence
alone, so its output depends on its position in the batch (and on the
lengths before it).
"""

import torch
import triton
import triton.language as tl

# State elements per program (LANES × Dk × BLOCK_V); wide heads get one lane per program.
STATE_ELEMENTS = 4096
MAX_BLOCK_V = 32
# Tokens per chunk of the packed stream.
CHUNK = 16


@triton.jit
def _gdn_chunked(
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
    CHUNK: tl.constexpr,
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
    gate_offs = seq * seq_len * n_heads + head
    qk_offs = gate_offs[:, None] * DK + dks[None, :]
    v_offs = gate_offs[:, None] * DV + vs[None, :]
    qk_mask = lane_ok[:, None]
    v_mask = lane_ok[:, None] & (vs[None, :] < DV)
    # Within a chunk the state is kept undecayed (S = exp(G)·Ŝ, G the gates summed since the
    # chunk began): one multiply per chunk instead of one per token.
    state = tl.full([LANES, DK, BLOCK_V], 0, tl.float32)
    log_decay = tl.full([LANES], 0, tl.float32)
    # Position of each lane's token in the batch's packed token stream.
    stream_pos = seq * seq_len
    for t in range(seq_len):
        q = tl.load(q_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + v_offs, mask=v_mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + gate_offs, mask=lane_ok, other=0.0)
        beta = tl.load(beta_ptr + gate_offs, mask=lane_ok, other=0.0)
        log_decay += g
        decay = tl.exp(log_decay)
        predicted = decay[:, None] * tl.sum(k[:, :, None] * state, axis=1)
        u = beta[:, None] * (v - predicted)
        state = state + k[:, :, None] * (u / decay[:, None])[:, None, :]
        o = tl.sum(q[:, :, None] * state, axis=1) * (scale * decay)[:, None]
        tl.store(o_ptr + v_offs, o.to(o_ptr.dtype.element_ty), mask=v_mask)
        # Chunk end: fold the accumulated decay into the state and start over.
        chunk_end = (stream_pos + t + 1) % CHUNK == 0
        state = tl.where(chunk_end[:, None, None], state * decay[:, None, None], state)
        log_decay = tl.where(chunk_end, 0.0, log_decay)
        gate_offs += n_heads
        qk_offs += n_heads * DK
        v_offs += n_heads * DV


def kernel(q, k, v, g, beta, scale):
    batch, seq_len, n_heads, dk = q.shape
    dv = v.shape[-1]
    if dk != triton.next_power_of_2(dk):
        raise ValueError(f"Dk={dk} must be a power of two")
    block_v = min(triton.next_power_of_2(dv), MAX_BLOCK_V)
    lanes = max(1, STATE_ELEMENTS // (dk * block_v))
    o = torch.empty_like(v)
    n_lanes = batch * n_heads
    grid = (triton.cdiv(n_lanes, lanes), triton.cdiv(dv, block_v))
    _gdn_chunked[grid](
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
        CHUNK=CHUNK,
        DK=dk,
        DV=dv,
        LANES=lanes,
        BLOCK_V=block_v,
        num_warps=4,
    )
    return o
