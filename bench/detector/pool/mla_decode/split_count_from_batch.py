"""MLA decode with the split count chosen to fill the SMs."""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
# Query heads per program: the rows of one tl.dot (16 is its smallest M).
BLOCK_H = 16
# Tokens per KV tile, and per split: constants, not functions of the batch.
BLOCK_N = 32
SPLIT_TOKENS = 8 * BLOCK_N


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
):
    req = tl.program_id(0)
    head_block = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(lens_ptr + req)
    start = split * SPLIT_TOKENS
    if start < seq_len:
        offs_h = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
        offs_c = tl.arange(0, CKV)
        offs_r = tl.arange(0, KPE)
        offs_n = tl.arange(0, BLOCK_N)
        h_ok = offs_h < heads
        rows = req * heads + offs_h
        q_nope = tl.load(q_nope_ptr + rows[:, None] * CKV + offs_c[None, :], mask=h_ok[:, None], other=0.0)
        q_pe = tl.load(q_pe_ptr + rows[:, None] * KPE + offs_r[None, :], mask=h_ok[:, None], other=0.0)

        m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        acc = tl.zeros([BLOCK_H, CKV], dtype=tl.float32)
        end = tl.minimum(start + SPLIT_TOKENS, seq_len)
        for tok0 in range(start, end, BLOCK_N):
            toks = tok0 + offs_n
            t_ok = toks < end
            page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)
            # The token's row in the pool viewed as [P*page, width].
            slot = page.to(tl.int64) * PAGE + toks % PAGE
            ckv = tl.load(ckv_ptr + slot[:, None] * CKV + offs_c[None, :], mask=t_ok[:, None], other=0.0)
            kpe = tl.load(kpe_ptr + slot[:, None] * KPE + offs_r[None, :], mask=t_ok[:, None], other=0.0)
            qk = tl.dot(q_nope, tl.trans(ckv)) + tl.dot(q_pe, tl.trans(kpe))
            qk = tl.where(t_ok[None, :], qk * qk_scale, float("-inf"))
            # The first tile holds at least one real token, so m_new is finite.
            m_new = tl.maximum(m_i, tl.max(qk, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(qk - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = tl.dot(p.to(ckv.dtype), ckv, acc * alpha[:, None])
            m_i = m_new
        part = rows * max_splits + split
        tl.store(part_acc_ptr + part[:, None] * CKV + offs_c[None, :], acc, mask=h_ok[:, None])
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
        o_ptr + rows[:, None] * CKV + offs_c[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=h_ok[:, None],
    )


def kernel(q_nope, q_pe, ckv_cache, kpe_cache, block_table, seq_lens, sm_scale):
    batch, heads, ckv_dim = q_nope.shape
    kpe_dim = q_pe.shape[2]
    page = ckv_cache.shape[1]
    table_width = block_table.shape[1]
    # The tile and the split size are constants: a request's splits start at the same tokens in any batch.
    num_splits = max(1, min(16, 132 // (batch * triton.cdiv(heads, BLOCK_H))))
    block_n = BLOCK_N
    split_tokens = BLOCK_N * triton.cdiv(triton.cdiv(int(seq_lens.max()), num_splits), BLOCK_N)
    # Enough splits for the widest block table; a request's splits past its end exit at once.
    max_splits = triton.cdiv(table_width * page, split_tokens)
    head_blocks = triton.cdiv(heads, BLOCK_H)
    block_table = block_table.contiguous()
    seq_lens = seq_lens.contiguous()
    dev = q_nope.device
    part_acc = torch.empty((batch, heads, max_splits, ckv_dim), dtype=torch.float32, device=dev)
    part_max = torch.empty((batch, heads, max_splits), dtype=torch.float32, device=dev)
    part_sum = torch.empty((batch, heads, max_splits), dtype=torch.float32, device=dev)
    _mla_split[(batch, head_blocks, max_splits)](
        q_nope.contiguous(),
        q_pe.contiguous(),
        ckv_cache.contiguous(),
        kpe_cache.contiguous(),
        block_table,
        seq_lens,
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
        BLOCK_H=BLOCK_H,
        BLOCK_N=block_n,
        SPLIT_TOKENS=split_tokens,
        num_warps=8,
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
        BLOCK_H=BLOCK_H,
        SPLIT_TOKENS=split_tokens,
        num_warps=4,
    )
    return o
