"""Kimi delta attention; more warps once the batch is large."""

import torch
import triton
import triton.language as tl

# State elements per program (LANES × Dk × BLOCK_V); wide heads get one lane per program.
STATE_ELEMENTS = 4096
MAX_BLOCK_V = 32
# Tokens per chunk of the gate's cumulative sum, counted from each sequence's first token.
CHUNK = 16


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
        # The chunk ends every CHUNK tokens of this sequence: its gate sum starts over.
        if (t + 1) % CHUNK == 0:
            chunk_sum = tl.full([LANES, DK], 0, tl.float32)
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
        CHUNK=CHUNK,
        DK=dk,
        DV=dv,
        LANES=lanes,
        BLOCK_V=block_v,
        num_warps=2 if batch < 4 else 8,
    )
    return o
