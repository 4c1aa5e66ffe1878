"""Gated delta net, chunked (WY / UT-transform) form: three Triton kernels over fixed chunks.

The recurrence ``S ← exp(g)·S; u ← beta·(v − kᵀS); S ← S + k⊗u; o = scale·qᵀS`` is
regrouped into chunks of ``CHUNK`` tokens (Yang et al., "Gated Delta Networks"). With
``γ`` the running sum of ``g`` inside a chunk and ``S₀`` the state entering it, the
chunk's delta-rule values solve ``(I + A)·U = diag(beta)·V − diag(beta·exp(γ))·K·S₀``,
``A[i,j] = beta_i·exp(γ_i − γ_j)·k_i·k_j`` for ``j < i``. With ``X = (I + A)⁻¹``:

1. ``_chunk_prepare`` (one program per chunk of a lane): ``A``, its inverse ``X`` by
   doubling the solved block size (1, 2, 4 … ``CHUNK``: ``X ← X − X·E·X``, ``E`` the
   entries between the two halves of each doubled block; blocks up to ``INVERSE_SUB``
   rows in a compact block-diagonal form), then ``W = X·(beta·exp(γ)·K)`` and
   ``U = X·(beta·V)``;
2. ``_chunk_state`` (one program per lane and value block): walks the chunks in order,
   keeping ``S`` in fp32 registers: it saves the entering state, ``V' = U − W·S``, and
   ``S ← exp(γ_last)·S + (exp(γ_last − γ)·K)ᵀ·V'``;
3. ``_chunk_output`` (one program per chunk of a lane and value block):
   ``O = scale·(exp(γ)·Q·S₀ + (causal(exp(γ_i − γ_j))·Q·Kᵀ)·V')``.

Batch-invariant by design:

- ``CHUNK`` is a constant, chunks are counted from each sequence's own first token, and
  a lane (one sequence's head) never reads another lane's data;
- every tile (``CHUNK``, Dk, the value blocks) comes from the constants and the head
  dims only; the grids grow with B·Hh and the chunk count, never the work of a program;
- the state passes the chunks of its lane strictly in order, in one program, for every
  batch; splitting Dv across programs changes no arithmetic (the delta rule's state
  columns are independent);
- a short sequence or a partial last chunk runs the same arithmetic as a full chunk: rows
  past the end load as zeros (their ``A`` rows and columns vanish, their ``W``/``U``
  rows are zero, their gate adds nothing to ``γ``) and are masked on store;
- no atomics, no autotuning; warps and stages are module constants.

Precision: ``A``, ``X``, ``γ`` and the state are fp32 (the inverse's own products in
``INVERSE_PRECISION``, tf32, for 16-bit inputs); the other matrix products take their
operands in the input dtype (bf16/fp16: tensor cores, fp32 accumulation; fp32 inputs:
IEEE fp32 products), and ``W``, ``U``, ``V'`` and the saved states are stored in it,
the precision those products read them in anyway.

Measured on the H200 (2026-12-02, torch 2.11, Triton 3.6; the whole gate passed on CUDA;
``lab/results/candidates_h200_2026-12-02_evening/check_gdn_chunked_pinned.json``): 0.94× fla's
``chunk_gated_delta_rule`` geomean over the task's five workloads (0.80–0.83× at 8K tokens of one
sequence, 1.00–1.07× for 4 × 4K, 16 × 1K and 64 × 256), where the token-by-token seed is 0.09×.
"""

import torch
import triton
import triton.language as tl

CHUNK = 64  # tokens per chunk, the same for every batch and length
# Value columns per state-walk program, and the prepare kernel's warps: pinned from the H200 runs of
# 2026-12-02 (64 and 4: 0.94x fla geomean in the gate's benchmark; 32 and 8 were 0.66x).
STATE_BLOCK_V = 64
OUTPUT_BLOCK_V = 64  # value columns per output program
PREPARE_WARPS = 4
STATE_WARPS = 4
STATE_STAGES = 2  # software pipelining of the chunk walk's loads
OUTPUT_WARPS = 4
# fp32 × fp32 products inside the inverse for 16-bit inputs (fp32 inputs use "ieee").
INVERSE_PRECISION = "tf32"
INVERSE_SUB = 16  # rows of the blocks inverted in compact form (see _chunk_prepare)

# The knobs `nodice evolve gdn --agent knobs` may set (docs/search.md): value columns per program,
# warps and the walk's pipeline depth, checked bit for bit against the best version before timing.
# 1-stage state walks faulted on the H200 with Triton 3.6: not offered.
KNOBS = {
    "STATE_BLOCK_V": (16, 32, 64),
    "OUTPUT_BLOCK_V": (32, 64, 128),
    "PREPARE_WARPS": (4, 8),
    "STATE_WARPS": (4, 8),
    "STATE_STAGES": (2, 3),
    "OUTPUT_WARPS": (4, 8),
}
# The chunk length and the inverse's block rows set the chunked form's sums: a setting that moves
# one is a new kernel, judged by the whole gate and timed, not compared bit for bit.
ORDER_KNOBS = {
    "CHUNK": (32, 64),
    "INVERSE_SUB": (16, 32),
}


@triton.jit
def _chunk_prepare(
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    gamma_ptr,
    w_ptr,
    u_ptr,
    seq_len,
    n_heads,
    DK: tl.constexpr,
    DV: tl.constexpr,
    DV_TILE: tl.constexpr,
    CHUNK: tl.constexpr,
    LOG2_CHUNK: tl.constexpr,
    SUB: tl.constexpr,
    LOG2_SUB: tl.constexpr,
    INV_PRECISION: tl.constexpr,
    PRECISION: tl.constexpr,
):
    lane = tl.program_id(0).to(tl.int64)  # lanes on axis 0: the only axis past 65535 programs
    chunk = tl.program_id(1)
    seq = lane // n_heads
    head = lane % n_heads
    rows = chunk * CHUNK + tl.arange(0, CHUNK)
    row_ok = rows < seq_len
    dks = tl.arange(0, DK)
    dvs = tl.arange(0, DV_TILE)
    # Inputs are [B, T, Hh, D]; the lane's buffers are [lane, T, D].
    token = (seq * seq_len + rows) * n_heads + head
    g = tl.load(g_ptr + token, mask=row_ok, other=0.0)
    beta = tl.load(beta_ptr + token, mask=row_ok, other=0.0)
    k = tl.load(k_ptr + token[:, None] * DK + dks[None, :], mask=row_ok[:, None], other=0.0)
    v_mask = row_ok[:, None] & (dvs[None, :] < DV)
    v = tl.load(v_ptr + token[:, None] * DV + dvs[None, :], mask=v_mask, other=0.0)
    gamma = tl.cumsum(g, 0)
    tl.store(gamma_ptr + lane * seq_len + rows, gamma, mask=row_ok)

    i = tl.arange(0, CHUNK)[:, None]
    j = tl.arange(0, CHUNK)[None, :]
    # exp of a difference, never a ratio of exps: a decayed-away prefix underflows to 0
    # instead of dividing 0 by 0; entries above the diagonal take exp(0) and are dropped.
    decay = tl.exp(tl.where(j <= i, gamma[:, None] - gamma[None, :], 0.0))
    kk = tl.dot(k, tl.trans(k), input_precision=PRECISION)
    a = tl.where(j < i, kk * decay * beta[:, None], 0.0)

    # X = (I + A)⁻¹ with A strictly lower triangular. X starts as the inverse of the
    # diagonal (blocks of 1); each step doubles the block: for [[L11, 0], [L21, L22]] with
    # X11, X22 known the inverse is [[X11, 0], [−X22·L21·X11, X22]], i.e. X − X·E·X.
    # While the blocks fit in SUB rows, X and E are block diagonal and X is kept compact
    # (xc[r, c] = X[r, SUB·(r // SUB) + c]): a block-diagonal M times X is then M·xc, a
    # CHUNK × SUB product instead of CHUNK × CHUNK.
    sub_cols = tl.arange(0, SUB)[None, :]
    same_sub = (i // SUB) == (j // SUB)
    xc = tl.where(i % SUB == sub_cols, 1.0, 0.0)
    for s in range(LOG2_SUB):  # loops, not unrolled: one step's tiles live at a time
        half = 1 << s
        e = tl.where(((i // (2 * half)) == (j // (2 * half))) & ((i // half) != (j // half)), a, 0.0)
        x = tl.where(
            same_sub,
            tl.reshape(tl.broadcast_to(xc[:, None, :], [CHUNK, CHUNK // SUB, SUB]), [CHUNK, CHUNK]),
            0.0,
        )
        exc = tl.dot(e, xc, input_precision=INV_PRECISION)
        xc = xc - tl.dot(x, exc, input_precision=INV_PRECISION)
    x = tl.where(
        same_sub, tl.reshape(tl.broadcast_to(xc[:, None, :], [CHUNK, CHUNK // SUB, SUB]), [CHUNK, CHUNK]), 0.0
    )
    for s in range(LOG2_SUB, LOG2_CHUNK):
        half = 1 << s
        e = tl.where(((i // (2 * half)) == (j // (2 * half))) & ((i // half) != (j // half)), a, 0.0)
        xe = tl.dot(x, e, input_precision=INV_PRECISION)
        x = x - tl.dot(xe, x, input_precision=INV_PRECISION)

    dot_t = k_ptr.dtype.element_ty
    x_op = x.to(dot_t)
    k_scaled = (k.to(tl.float32) * (beta * tl.exp(gamma))[:, None]).to(dot_t)
    w = tl.dot(x_op, k_scaled, input_precision=PRECISION)
    v_scaled = (v.to(tl.float32) * beta[:, None]).to(dot_t)
    u = tl.dot(x_op, v_scaled, input_precision=PRECISION)
    lane_rows = lane * seq_len + rows
    tl.store(
        w_ptr + lane_rows[:, None] * DK + dks[None, :], w.to(w_ptr.dtype.element_ty), mask=row_ok[:, None]
    )
    tl.store(u_ptr + lane_rows[:, None] * DV + dvs[None, :], u.to(u_ptr.dtype.element_ty), mask=v_mask)


@triton.jit
def _chunk_state(
    k_ptr,
    gamma_ptr,
    w_ptr,
    u_ptr,
    vnew_ptr,
    h_ptr,
    seq_len,
    n_heads,
    n_chunks,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_V: tl.constexpr,
    CHUNK: tl.constexpr,
    STAGES: tl.constexpr,
    PRECISION: tl.constexpr,
):
    lane = tl.program_id(0).to(tl.int64)
    seq = lane // n_heads
    head = lane % n_heads
    dks = tl.arange(0, DK)
    vs = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    v_ok = vs < DV
    dot_t = k_ptr.dtype.element_ty
    state = tl.zeros([DK, BLOCK_V], dtype=tl.float32)
    for c in tl.range(0, n_chunks, num_stages=STAGES):
        rows = c * CHUNK + tl.arange(0, CHUNK)
        row_ok = rows < seq_len
        # The state entering chunk c, for the output kernel: h[lane, c, Dk, Dv].
        h_offs = (lane * n_chunks + c) * DK * DV + dks[:, None] * DV + vs[None, :]
        tl.store(h_ptr + h_offs, state.to(h_ptr.dtype.element_ty), mask=v_ok[None, :])
        lane_rows = lane * seq_len + rows
        token = (seq * seq_len + rows) * n_heads + head
        w = tl.load(w_ptr + lane_rows[:, None] * DK + dks[None, :], mask=row_ok[:, None], other=0.0)
        rv_mask = row_ok[:, None] & v_ok[None, :]
        u = tl.load(u_ptr + lane_rows[:, None] * DV + vs[None, :], mask=rv_mask, other=0.0)
        k = tl.load(k_ptr + token[:, None] * DK + dks[None, :], mask=row_ok[:, None], other=0.0)
        gamma = tl.load(gamma_ptr + lane_rows, mask=row_ok, other=0.0)
        # γ at the chunk's last real token (rows past the end add no decay).
        last = tl.minimum(c * CHUNK + CHUNK, seq_len) - 1
        gamma_last = tl.load(gamma_ptr + lane * seq_len + last)
        vnew = u.to(tl.float32) - tl.dot(w.to(dot_t), state.to(dot_t), input_precision=PRECISION)
        vnew_op = vnew.to(dot_t)
        tl.store(
            vnew_ptr + lane_rows[:, None] * DV + vs[None, :],
            vnew_op.to(vnew_ptr.dtype.element_ty),
            mask=rv_mask,
        )
        # The decay to the chunk's end scales V' (CHUNK × BLOCK_V), not K (CHUNK × Dk): K goes
        # to the product as loaded. Padded rows have k = 0 and so add nothing.
        decay_to_end = tl.exp(tl.where(row_ok, gamma_last - gamma, 0.0))
        vnew_decayed = (vnew * decay_to_end[:, None]).to(dot_t)
        state = tl.dot(
            tl.trans(k.to(dot_t)), vnew_decayed, acc=state * tl.exp(gamma_last), input_precision=PRECISION
        )


@triton.jit
def _chunk_output(
    q_ptr,
    k_ptr,
    gamma_ptr,
    vnew_ptr,
    h_ptr,
    o_ptr,
    seq_len,
    n_heads,
    n_chunks,
    scale,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_V: tl.constexpr,
    CHUNK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    lane = tl.program_id(0).to(tl.int64)  # lanes on axis 0: the only axis past 65535 programs
    chunk = tl.program_id(1)
    seq = lane // n_heads
    head = lane % n_heads
    rows = chunk * CHUNK + tl.arange(0, CHUNK)
    row_ok = rows < seq_len
    dks = tl.arange(0, DK)
    vs = tl.program_id(2) * BLOCK_V + tl.arange(0, BLOCK_V)
    v_ok = vs < DV
    dot_t = q_ptr.dtype.element_ty
    token = (seq * seq_len + rows) * n_heads + head
    lane_rows = lane * seq_len + rows
    q = tl.load(q_ptr + token[:, None] * DK + dks[None, :], mask=row_ok[:, None], other=0.0)
    k = tl.load(k_ptr + token[:, None] * DK + dks[None, :], mask=row_ok[:, None], other=0.0)
    gamma = tl.load(gamma_ptr + lane_rows, mask=row_ok, other=0.0)
    rv_mask = row_ok[:, None] & v_ok[None, :]
    vnew = tl.load(vnew_ptr + lane_rows[:, None] * DV + vs[None, :], mask=rv_mask, other=0.0)
    h_offs = (lane * n_chunks + chunk) * DK * DV + dks[:, None] * DV + vs[None, :]
    h = tl.load(h_ptr + h_offs, mask=v_ok[None, :], other=0.0)

    i = tl.arange(0, CHUNK)[:, None]
    j = tl.arange(0, CHUNK)[None, :]
    decay = tl.exp(tl.where(j <= i, gamma[:, None] - gamma[None, :], 0.0))
    qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
    p = tl.where(j <= i, qk * decay, 0.0)
    inter = tl.dot(q, h.to(dot_t), input_precision=PRECISION) * tl.exp(gamma)[:, None]
    intra = tl.dot(p.to(dot_t), vnew.to(dot_t), input_precision=PRECISION)
    o = (inter + intra) * scale
    tl.store(o_ptr + token[:, None] * DV + vs[None, :], o.to(o_ptr.dtype.element_ty), mask=rv_mask)


def kernel(q, k, v, g, beta, scale):
    batch, seq_len, n_heads, dk = q.shape
    dv = v.shape[-1]
    if dk != triton.next_power_of_2(dk) or dk < 16:
        raise ValueError(f"Dk={dk} must be a power of two, at least 16")
    if dv < 16:
        raise ValueError(f"Dv={dv} must be at least 16")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    g, beta = g.contiguous().float(), beta.contiguous().float()
    o = torch.empty_like(v)
    lanes = batch * n_heads
    if lanes == 0 or seq_len == 0:
        return o
    n_chunks = triton.cdiv(seq_len, CHUNK)
    dv_tile = triton.next_power_of_2(dv)
    state_block_v = min(dv_tile, STATE_BLOCK_V)
    output_block_v = min(dv_tile, OUTPUT_BLOCK_V)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    inv_precision = "ieee" if q.dtype == torch.float32 else INVERSE_PRECISION
    dev = q.device
    gamma = torch.empty((lanes, seq_len), dtype=torch.float32, device=dev)
    w = torch.empty((lanes, seq_len, dk), dtype=q.dtype, device=dev)
    u = torch.empty((lanes, seq_len, dv), dtype=q.dtype, device=dev)
    vnew = torch.empty((lanes, seq_len, dv), dtype=q.dtype, device=dev)
    h = torch.empty((lanes, n_chunks, dk, dv), dtype=q.dtype, device=dev)
    _chunk_prepare[(lanes, n_chunks)](
        k,
        v,
        g,
        beta,
        gamma,
        w,
        u,
        seq_len,
        n_heads,
        DK=dk,
        DV=dv,
        DV_TILE=dv_tile,
        CHUNK=CHUNK,
        LOG2_CHUNK=CHUNK.bit_length() - 1,
        SUB=min(CHUNK, INVERSE_SUB),
        LOG2_SUB=min(CHUNK, INVERSE_SUB).bit_length() - 1,
        INV_PRECISION=inv_precision,
        PRECISION=precision,
        num_warps=PREPARE_WARPS,
    )
    _chunk_state[(lanes, triton.cdiv(dv, state_block_v))](
        k,
        gamma,
        w,
        u,
        vnew,
        h,
        seq_len,
        n_heads,
        n_chunks,
        DK=dk,
        DV=dv,
        BLOCK_V=state_block_v,
        CHUNK=CHUNK,
        STAGES=STATE_STAGES,
        PRECISION=precision,
        num_warps=STATE_WARPS,
    )
    _chunk_output[(lanes, n_chunks, triton.cdiv(dv, output_block_v))](
        q,
        k,
        gamma,
        vnew,
        h,
        o,
        seq_len,
        n_heads,
        n_chunks,
        scale,
        DK=dk,
        DV=dv,
        BLOCK_V=output_block_v,
        CHUNK=CHUNK,
        PRECISION=precision,
        num_warps=OUTPUT_WARPS,
    )
    return o
