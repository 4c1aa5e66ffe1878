"""MLA decode candidate: wide head blocks, value columns split across programs, larger fixed splits.

The seed (``nodice/examples/mla_decode/seed.py``, 604 GB/s geomean on the H200 against FlashInfer
MLA's 1732) gives each program 16 query heads, so with 128 heads eight programs read every KV tile,
and splits of 256 tokens write a 512-wide fp32 partial per head for every 256 tokens read: at
b128-kv32k the partials are as large as the cache. This candidate changes three things, each a pin
keyed on the head count or a constant, never on the batch:

- ``BLOCK_H`` query heads per program (up to 64: one m64 MMA row block), so a KV tile is read by
  ``heads / BLOCK_H`` programs instead of ``heads / 16``;
- the 512 value columns are cut into ``V_PARTS`` column blocks, one per program, so the fp32
  accumulator of a program is ``BLOCK_H × 512 / V_PARTS``; each program still computes the whole
  score tile (the 576-wide q·k, in ``D_CHUNK``-wide slices of the latent so no operand holds all of
  it), and the parts of one (request, head block, split) compute identical scores;
- ``SPLIT_TOKENS`` tokens per split (default 1024), counted from the request's first token.

Batch-invariant: a request's splits start at the same tokens in any batch, every tile and slice is a
constant, the score of a token is the same sum of the same ``D_CHUNK`` slices in the same order in
every program, and the combine folds a request's splits first to last. The grid is sized from the
block table's width; splits past a request's end exit at once. No atomics.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
# Heads per program, by the model's head count (never the batch).
MAX_BLOCK_H = 64
BLOCK_N = 32
SPLIT_TOKENS = 1024
V_PARTS = 2
D_CHUNK = 128
NUM_WARPS = 8
NUM_STAGES = 2

# `nodice evolve mla_decode --agent knobs --seed lab/candidates/mla_decode_wide.py` searches these
# (docs/search.md): warps and stages bit for bit against the best version; the key tile, the split
# size and the value parts set the online softmax's steps and the fold: order knobs, judged by the gate.
KNOBS = {
    "NUM_WARPS": (4, 8),
    "NUM_STAGES": (1, 2),
}
ORDER_KNOBS = {
    "BLOCK_N": (32, 64),
    "SPLIT_TOKENS": (512, 1024, 2048),
    "V_PARTS": (1, 2, 4),
}


@triton.jit
def _mla_split(
    q_nope_ptr,
    q_pe_ptr,
    ckv_ptr,
    kpe_ptr,
    table_ptr,
    lens_ptr,
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    qk_scale,
    table_width,
    max_splits,
    heads,
    CKV: tl.constexpr,
    KPE: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_TOKENS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    D_CHUNK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    req = tl.program_id(0)
    head_block = tl.program_id(1)
    v_part = tl.program_id(2) % (CKV // BLOCK_V)
    split = tl.program_id(2) // (CKV // BLOCK_V)
    seq_len = tl.load(lens_ptr + req)
    start = split * SPLIT_TOKENS
    if start < seq_len:
        offs_h = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
        offs_d = tl.arange(0, D_CHUNK)
        offs_r = tl.arange(0, KPE)
        offs_v = v_part * BLOCK_V + tl.arange(0, BLOCK_V)
        offs_n = tl.arange(0, BLOCK_N)
        h_ok = offs_h < heads
        rows = req * heads + offs_h
        q_pe = tl.load(q_pe_ptr + rows[:, None] * KPE + offs_r[None, :], mask=h_ok[:, None], other=0.0)

        m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        acc = tl.zeros([BLOCK_H, BLOCK_V], dtype=tl.float32)
        end = tl.minimum(start + SPLIT_TOKENS, seq_len)
        for tok0 in tl.range(start, end, BLOCK_N, num_stages=NUM_STAGES):
            toks = tok0 + offs_n
            t_ok = toks < end
            page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)
            # The token's row in the pool viewed as [P*page, width].
            slot = page.to(tl.int64) * PAGE + toks % PAGE
            kpe = tl.load(kpe_ptr + slot[:, None] * KPE + offs_r[None, :], mask=t_ok[:, None], other=0.0)
            qk = tl.dot(q_pe, tl.trans(kpe))
            # The latent part of the score, D_CHUNK columns at a time, always in the same order.
            for d0 in tl.static_range(0, CKV, D_CHUNK):
                q_d = tl.load(
                    q_nope_ptr + rows[:, None] * CKV + (d0 + offs_d)[None, :], mask=h_ok[:, None], other=0.0
                )
                k_d = tl.load(
                    ckv_ptr + slot[:, None] * CKV + (d0 + offs_d)[None, :], mask=t_ok[:, None], other=0.0
                )
                qk = tl.dot(q_d, tl.trans(k_d), qk)
            qk = tl.where(t_ok[None, :], qk * qk_scale, float("-inf"))
            # The first tile holds at least one real token, so m_new is finite.
            m_new = tl.maximum(m_i, tl.max(qk, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(qk - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(ckv_ptr + slot[:, None] * CKV + offs_v[None, :], mask=t_ok[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        part = rows * max_splits + split
        tl.store(part_acc_ptr + part[:, None] * CKV + offs_v[None, :], acc, mask=h_ok[:, None])
        if v_part == 0:
            tl.store(part_max_ptr + part, m_i, mask=h_ok)
            tl.store(part_sum_ptr + part, l_i, mask=h_ok)


@triton.jit
def _combine_splits(
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    lens_ptr,
    o_ptr,
    max_splits,
    heads,
    CKV: tl.constexpr,
    BLOCK_H: tl.constexpr,
    SPLIT_TOKENS: tl.constexpr,
):
    req = tl.program_id(0)
    head_block = tl.program_id(1)
    seq_len = tl.load(lens_ptr + req)
    n_splits = (seq_len + SPLIT_TOKENS - 1) // SPLIT_TOKENS
    offs_h = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_c = tl.arange(0, CKV)
    h_ok = offs_h < heads
    rows = req * heads + offs_h
    m_all = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_all = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, CKV], dtype=tl.float32)
    # Splits folded first to last: the order is the request's own.
    for s in range(0, n_splits):
        part = rows * max_splits + s
        m_s = tl.load(part_max_ptr + part, mask=h_ok, other=0.0)
        l_s = tl.load(part_sum_ptr + part, mask=h_ok, other=0.0)
        a_s = tl.load(part_acc_ptr + part[:, None] * CKV + offs_c[None, :], mask=h_ok[:, None], other=0.0)
        m_new = tl.maximum(m_all, m_s)
        alpha = tl.exp2(m_all - m_new)
        beta = tl.exp2(m_s - m_new)
        l_all = l_all * alpha + l_s * beta
        acc = acc * alpha[:, None] + a_s * beta[:, None]
        m_all = m_new
    # Padded head rows have no splits; divide them by 1 instead of 0.
    out = acc / tl.where(h_ok, l_all, 1.0)[:, None]
    tl.store(
        o_ptr + rows[:, None] * CKV + offs_c[None, :], out.to(o_ptr.dtype.element_ty), mask=h_ok[:, None]
    )


def _block_h(heads: int) -> int:
    return max(16, min(MAX_BLOCK_H, triton.next_power_of_2(heads)))


def kernel(q_nope, q_pe, ckv_cache, kpe_cache, block_table, seq_lens, sm_scale):
    batch, heads, ckv_dim = q_nope.shape
    kpe_dim = q_pe.shape[2]
    page = ckv_cache.shape[1]
    table_width = block_table.shape[1]
    block_h = _block_h(heads)
    # Value columns per program and the latent slice per dot: constants dividing the latent width.
    block_v = ckv_dim // V_PARTS if ckv_dim % V_PARTS == 0 else ckv_dim
    d_chunk = D_CHUNK if ckv_dim % D_CHUNK == 0 else ckv_dim
    # Enough splits for the widest block table; a request's splits past its end exit at once.
    max_splits = triton.cdiv(table_width * page, SPLIT_TOKENS)
    head_blocks = triton.cdiv(heads, block_h)
    dev = q_nope.device
    part_acc = torch.empty((batch, heads, max_splits, ckv_dim), dtype=torch.float32, device=dev)
    part_max = torch.empty((batch, heads, max_splits), dtype=torch.float32, device=dev)
    part_sum = torch.empty((batch, heads, max_splits), dtype=torch.float32, device=dev)
    _mla_split[(batch, head_blocks, max_splits * (ckv_dim // block_v))](
        q_nope.contiguous(),
        q_pe.contiguous(),
        ckv_cache.contiguous(),
        kpe_cache.contiguous(),
        block_table.contiguous(),
        seq_lens.contiguous(),
        part_acc,
        part_max,
        part_sum,
        sm_scale * LOG2E,
        table_width,
        max_splits,
        heads,
        CKV=ckv_dim,
        KPE=kpe_dim,
        PAGE=page,
        BLOCK_H=block_h,
        BLOCK_N=BLOCK_N,
        SPLIT_TOKENS=SPLIT_TOKENS,
        BLOCK_V=block_v,
        D_CHUNK=d_chunk,
        NUM_STAGES=NUM_STAGES,
        num_warps=NUM_WARPS,
    )
    o = torch.empty_like(q_nope)
    _combine_splits[(batch, head_blocks)](
        part_acc,
        part_max,
        part_sum,
        seq_lens,
        o,
        max_splits,
        heads,
        CKV=ckv_dim,
        BLOCK_H=block_h,
        SPLIT_TOKENS=SPLIT_TOKENS,
        num_warps=4,
    )
    return o
