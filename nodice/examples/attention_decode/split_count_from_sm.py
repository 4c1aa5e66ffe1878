"""VIOLATES batch invariance: flash-decoding with a split count from batch·heads vs the SM count.

Decode has too little parallel work per (request, head) to fill the GPU, so
the keys are split into ``num_splits`` ranges processed in parallel and merged
afterwards. ``num_splits`` is chosen so that batch·heads·splits fills the
streaming multiprocessors (fewer requests → more splits) and the split
length comes from the batch's longest request, so a request's keys are
grouped differently, and its output bits change, with the batch size and
with its batchmates' lengths.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_SPLITS = 16


def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # an H100/H200, for runs under the interpreter


@triton.jit
def _decode_split(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    part_acc_ptr,
    part_max_ptr,
    part_sum_ptr,
    qk_scale,
    table_width,
    num_splits,
    split_tokens,
    q_heads,
    kv_heads,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(lens_ptr + req)
    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = offs_g < GROUP
    heads = kv_head * GROUP + offs_g
    q = tl.load(
        q_ptr + (req * q_heads + heads)[:, None] * HEAD_DIM + offs_d[None, :], mask=g_ok[:, None], other=0.0
    )
    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    start = split * split_tokens
    end = tl.minimum(start + split_tokens, seq_len)
    for tok0 in range(start, end, BLOCK_N):
        toks = tok0 + offs_n
        t_ok = toks < end
        page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)
        row = (page.to(tl.int64) * PAGE + toks % PAGE) * kv_heads + kv_head
        k = tl.load(k_ptr + row[None, :] * HEAD_DIM + offs_d[:, None], mask=t_ok[None, :], other=0.0)
        qk = tl.where(t_ok[None, :], tl.dot(q, k) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=t_ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    # Splits past the request's end store an empty partial (max -inf, sum 0).
    part = (req * q_heads + heads) * num_splits + split
    tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=g_ok[:, None])
    tl.store(part_max_ptr + part, m_i, mask=g_ok)
    tl.store(part_sum_ptr + part, l_i, mask=g_ok)


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    batch, q_heads, head_dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    block_n = 64 if head_dim >= 64 else 16
    # Enough splits to fill the machine, each a whole number of tiles of the longest request.
    num_splits = max(1, min(MAX_SPLITS, _sm_count(q.device) // (batch * q_heads)))
    max_len = int(seq_lens.max())
    split_tokens = triton.cdiv(triton.cdiv(max_len, num_splits), block_n) * block_n
    num_splits = triton.cdiv(max_len, split_tokens)
    part_acc = torch.empty((batch, q_heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    part_max = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)
    part_sum = torch.empty((batch, q_heads, num_splits), dtype=torch.float32, device=q.device)
    _decode_split[(batch, kv_heads, num_splits)](
        q.contiguous(),
        k_cache.contiguous(),
        v_cache.contiguous(),
        block_table.contiguous(),
        seq_lens.contiguous(),
        part_acc,
        part_max,
        part_sum,
        sm_scale * LOG2E,
        block_table.shape[1],
        num_splits,
        split_tokens,
        q_heads,
        kv_heads,
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        PAGE=page,
        BLOCK_N=block_n,
        num_warps=4,
    )
    # Merge: every split rescaled to the common max; empty splits weigh exp2(-inf) = 0.
    m_all = part_max.max(dim=2, keepdim=True).values
    weight = torch.exp2(part_max - m_all)
    total = (part_sum * weight).sum(dim=2)
    out = (part_acc * weight.unsqueeze(-1)).sum(dim=2) / total.unsqueeze(-1)
    return out.to(q.dtype)
