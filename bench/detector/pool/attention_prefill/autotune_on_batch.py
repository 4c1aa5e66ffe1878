"""Autotuned flash attention."""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


def _prune(configs, named_args, **kwargs):
    small = named_args["batch"] <= 2
    return [c for c in configs if (c.kwargs["BLOCK_N"] == 16) == small]


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 16}), triton.Config({"BLOCK_M": 64, "BLOCK_N": 32})],
    key=["batch", "seq_len", "HEAD_DIM"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.jit
def _flash_forward(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    qk_scale,
    batch,
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
    kv_head = (seq_head % q_heads) // group
    kv_offset = (seq * (q_heads // group) + kv_head).to(tl.int64) * seq_len * HEAD_DIM
    q_base = seq_head.to(tl.int64) * seq_len * HEAD_DIM
    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(
        q_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0
    )
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = seq_len
    if CAUSAL:
        hi = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        k = tl.load(
            k_ptr + kv_offset + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0
        )
        qk = tl.dot(q, k) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
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
    tl.store(
        o_ptr + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
        out.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None],
    )


def kernel(q, k, v, causal, sm_scale):
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    batch, q_heads, seq_len, head_dim = q.shape
    o = torch.empty_like(q)
    grid = lambda meta: (triton.cdiv(seq_len, meta["BLOCK_M"]), batch * q_heads)
    _flash_forward[grid](
        q,
        k,
        v,
        o,
        sm_scale * LOG2E,
        batch,
        seq_len,
        q_heads,
        q_heads // k.shape[1],
        CAUSAL=bool(causal),
        HEAD_DIM=head_dim,
    )
    return o
