"""Flash-attention forward building blocks for the prefill candidates."""
import triton
import triton.language as tl


@triton.jit
def attn_block_loop(q, acc, m_i, l_i, k_base, v_base, s_kn, offs_m, lo, hi, S, sm_scale,
                    D: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    offs_d = tl.arange(0, D)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kmask = offs_n < hi
        k = tl.load(k_base + offs_n[None, :] * s_kn + offs_d[:, None], mask=kmask[None, :], other=0.0)
        qk = tl.dot(q, k) * sm_scale
        valid = kmask[None, :] & (offs_n[None, :] < S)
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + offs_n[:, None] * s_kn + offs_d[None, :], mask=kmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def flash_fwd(q_ptr, k_ptr, v_ptr, o_ptr, Hq, Hkv, S, sm_scale,
              s_qb, s_qh, s_qs, s_kb, s_kh, s_ks,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, HEADS_FIRST: tl.constexpr):
    if HEADS_FIRST:
        bh = tl.program_id(0)
        pid_m = tl.program_id(1)
    else:
        pid_m = tl.program_id(0)
        bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    hk = h // (Hq // Hkv)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_base = q_ptr + b * s_qb + h * s_qh
    q = tl.load(q_base + offs_m[:, None] * s_qs + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    k_base = k_ptr + b * s_kb + hk * s_kh
    v_base = v_ptr + b * s_kb + hk * s_kh
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, (pid_m + 1) * BLOCK_M)
    acc, m_i, l_i = attn_block_loop(q, acc, m_i, l_i, k_base, v_base, s_ks, offs_m, 0, hi, S,
                                    sm_scale, D, BLOCK_N, CAUSAL)
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * s_qb + h * s_qh + offs_m[:, None] * s_qs + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < S)


@triton.jit
def flash_fwd_split(q_ptr, k_ptr, v_ptr, acc_ptr, ml_ptr, Hq, Hkv, S, KV_PER, sm_scale,
                    s_qb, s_qh, s_qs, s_kb, s_kh, s_ks,
                    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr):
    """Unnormalised partial attention over keys [split*KV_PER, (split+1)*KV_PER)."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    split = tl.program_id(2)
    n_split = tl.num_programs(2)
    b = bh // Hq
    h = bh % Hq
    hk = h // (Hq // Hkv)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + b * s_qb + h * s_qh + offs_m[:, None] * s_qs + offs_d[None, :],
                mask=offs_m[:, None] < S, other=0.0)
    k_base = k_ptr + b * s_kb + hk * s_kh
    v_base = v_ptr + b * s_kb + hk * s_kh
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    lo = split * KV_PER
    hi = tl.minimum(S, lo + KV_PER)
    if CAUSAL:
        hi = tl.minimum(hi, (pid_m + 1) * BLOCK_M)
    acc, m_i, l_i = attn_block_loop(q, acc, m_i, l_i, k_base, v_base, s_ks, offs_m, lo, hi, S,
                                    sm_scale, D, BLOCK_N, CAUSAL)
    row = (bh * n_split + split) * S + offs_m
    tl.store(acc_ptr + row[:, None] * D + offs_d[None, :], acc, mask=offs_m[:, None] < S)
    tl.store(ml_ptr + row * 2, m_i, mask=offs_m < S)
    tl.store(ml_ptr + row * 2 + 1, l_i, mask=offs_m < S)
