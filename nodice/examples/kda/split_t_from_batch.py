"""VIOLATES batch invariance: few lanes split each sequence over T into segments, their count from the batch.

With few (sequence, head) lanes the token loop leaves most SMs idle, so the
kernel cuts each sequence into segments of whole chunks and runs them in
parallel, as context-parallel KDA does across devices: every segment computes
its local state from zero and its transition (the product of
``(I − β·k·kᵀ)·diag(exp(g))`` over its tokens) at once, a short scan combines
them into each segment's start state ``P·S + L``, and the segments run again
from those states for their outputs. The segment count is
``132 // (B·Hh)``, at most one per chunk. Start states combined from
transitions round differently from the token-by-token state, so a sequence's
output depends on how many lanes its batch has.
"""

import torch
import triton
import triton.language as tl

# State elements per program (LANES × Dk × BLOCK_V); wide heads get one lane per program.
STATE_ELEMENTS = 4096
MAX_BLOCK_V = 32
# Tokens per chunk of the gate's cumulative sum, counted from each sequence's first token.
CHUNK = 16
# Programs the launch should fill (the H200's SMs).
SM_COUNT = 132


@triton.jit
def _kda_segments(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    start_ptr,
    final_ptr,
    n_lanes,
    seq_len,
    n_heads,
    scale,
    seg_len,
    CHUNK: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    LANES: tl.constexpr,
    BLOCK_V: tl.constexpr,
    LOAD_START: tl.constexpr,
    STORE_OUT: tl.constexpr,
    STORE_FINAL: tl.constexpr,
):
    lanes = tl.program_id(0) * LANES + tl.arange(0, LANES)
    lane_ok = lanes < n_lanes
    seq = (lanes // n_heads).to(tl.int64)
    head = lanes % n_heads
    dks = tl.arange(0, DK)
    vs = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    segment = tl.program_id(2)
    t0 = segment * seg_len
    t1 = tl.minimum(seq_len, t0 + seg_len)
    # Offsets of the segment's first token of each lane; one token further is n_heads heads further.
    beta_offs = (seq * seq_len + t0) * n_heads + head
    qk_offs = beta_offs[:, None] * DK + dks[None, :]
    v_offs = beta_offs[:, None] * DV + vs[None, :]
    qk_mask = lane_ok[:, None]
    v_mask = lane_ok[:, None] & (vs[None, :] < DV)
    # This segment's [DK, DV] state slot of each lane.
    slot = (lanes.to(tl.int64) * tl.num_programs(2) + segment) * DK
    state_offs = (slot[:, None, None] + dks[None, :, None]) * DV + vs[None, None, :]
    state_mask = lane_ok[:, None, None] & (vs[None, None, :] < DV)
    if LOAD_START:
        state = tl.load(start_ptr + state_offs, mask=state_mask, other=0.0)
    else:
        state = tl.full([LANES, DK, BLOCK_V], 0, tl.float32)
    # The per-channel log-decay summed since the current chunk began (segments start on chunks).
    chunk_sum = tl.full([LANES, DK], 0, tl.float32)
    for t in range(t0, t1):
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
        if STORE_OUT:
            q = tl.load(q_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
            o = tl.sum(q[:, :, None] * state, axis=1) * scale
            tl.store(o_ptr + v_offs, o.to(o_ptr.dtype.element_ty), mask=v_mask)
        if (t + 1) % CHUNK == 0:
            chunk_sum = tl.full([LANES, DK], 0, tl.float32)
        beta_offs += n_heads
        qk_offs += n_heads * DK
        v_offs += n_heads * DV
    if STORE_FINAL:
        tl.store(final_ptr + state_offs, state, mask=state_mask)


def _launch(q, k, v, g, beta, o, start, final, segments, seg_len, scale, store_out):
    batch, seq_len, n_heads, dk = q.shape
    width = v.shape[-1]
    block_v = min(triton.next_power_of_2(width), MAX_BLOCK_V)
    lanes = max(1, STATE_ELEMENTS // (dk * block_v))
    n_lanes = batch * n_heads
    grid = (triton.cdiv(n_lanes, lanes), triton.cdiv(width, block_v), segments)
    _kda_segments[grid](
        q,
        k,
        v,
        g,
        beta,
        o,
        start if start is not None else o,
        final if final is not None else o,
        n_lanes,
        seq_len,
        n_heads,
        scale,
        seg_len,
        CHUNK=CHUNK,
        DK=dk,
        DV=width,
        LANES=lanes,
        BLOCK_V=block_v,
        LOAD_START=start is not None,
        STORE_OUT=store_out,
        STORE_FINAL=final is not None,
        num_warps=4,
    )


def kernel(q, k, v, g, beta, scale):
    batch, seq_len, n_heads, dk = q.shape
    dv = v.shape[-1]
    if dk != triton.next_power_of_2(dk):
        raise ValueError(f"Dk={dk} must be a power of two")
    o = torch.empty_like(v)
    n_lanes = batch * n_heads
    chunks = triton.cdiv(seq_len, CHUNK)
    # Few lanes: split T so that lanes × segments fill the SMs, at most one segment per chunk.
    segments = min(chunks, max(1, SM_COUNT // n_lanes))
    seg_len = triton.cdiv(chunks, segments) * CHUNK
    segments = triton.cdiv(seq_len, seg_len)
    if segments == 1:
        _launch(q, k, v, g, beta, o, None, None, 1, seq_len, scale, True)
        return o
    f32 = dict(dtype=torch.float32, device=q.device)
    # Each segment from zero: its local state L.
    local = torch.empty((n_lanes, segments, dk, dv), **f32)
    _launch(q, k, v, g, beta, o, None, local, segments, seg_len, scale, False)
    # Each segment from the identity with zero values: its transition P (S_end = P·S_start + L).
    eye = torch.eye(dk, **f32).expand(n_lanes, segments, dk, dk).contiguous()
    transition = torch.empty_like(eye)
    no_values = torch.zeros((batch, seq_len, n_heads, dk), dtype=v.dtype, device=v.device)
    _launch(q, k, no_values, g, beta, o, eye, transition, segments, seg_len, scale, False)
    # The scan over segments, then every segment again from its start state for the outputs.
    start = torch.zeros_like(local)
    for s in range(1, segments):
        start[:, s] = torch.matmul(transition[:, s - 1], start[:, s - 1]) + local[:, s - 1]
    _launch(q, k, v, g, beta, o, start, None, segments, seg_len, scale, True)
    return o
