"""VIOLATES batch invariance: each row's top-k list is split across as many programs as the GPU has room for.

FlashMLA's decode scheduler (``get_mla_metadata``) divides the SMs among the
batch's (query row, head block) pairs and cuts every row's index list into that
many parts, whose partial softmax results are merged afterwards: few rows get
many splits, a full batch one. ``num_splits`` comes from the number of query
rows in the launch, so the same row's entries are grouped into different
partial sums, and its output bits change, with the batch size.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
BLOCK_H = 16
MAX_SPLITS = 8


def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # an H100/H200, for runs under the interpreter


@triton.jit
def _sparse_mla_split(
    q_ptr,
    kv_ptr,
    idx_ptr,
    acc_ptr,
    m_ptr,
    l_ptr,
    qk_scale,
    rows,
    heads,
    topk,
    d_qk,
    d_v,
    per_split,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LATENT: tl.constexpr,
    ROPE: tl.constexpr,
):
    row = tl.program_id(0)
    head_block = tl.program_id(1)
    split = tl.program_id(2)
    offs_h = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_v = tl.arange(0, LATENT)
    offs_r = tl.arange(0, ROPE)
    head_ok = offs_h < heads
    latent_ok = offs_v < d_v
    rope_ok = offs_r < d_qk - d_v

    q_base = q_ptr + row.to(tl.int64) * heads * d_qk + offs_h[:, None] * d_qk
    q_nope = tl.load(q_base + offs_v[None, :], mask=head_ok[:, None] & latent_ok[None, :], other=0.0)
    q_rope = tl.load(q_base + d_v + offs_r[None, :], mask=head_ok[:, None] & rope_ok[None, :], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, LATENT], dtype=tl.float32)
    idx_base = idx_ptr + row.to(tl.int64) * topk
    # This split's part of the index list: whole tiles, per_split entries.
    lo = split * per_split
    hi = tl.minimum(lo + per_split, topk)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        slot = tl.load(idx_base + cols, mask=cols < hi, other=-1)
        used = slot >= 0
        token = kv_ptr + tl.maximum(slot, 0).to(tl.int64)[:, None] * d_qk
        k_nope = tl.load(token + offs_v[None, :], mask=used[:, None] & latent_ok[None, :], other=0.0)
        k_rope = tl.load(token + d_v + offs_r[None, :], mask=used[:, None] & rope_ok[None, :], other=0.0)
        scores = tl.dot(q_nope, tl.trans(k_nope)) + tl.dot(q_rope, tl.trans(k_rope))
        scores = tl.where(used[None, :], scores * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(scores - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(k_nope.dtype), k_nope, acc * alpha[:, None])
        m_i = m_new
    # Partials are laid out [split, row, head]: padded heads are not stored.
    slot_h = (split * rows + row).to(tl.int64) * heads + offs_h
    tl.store(acc_ptr + slot_h[:, None] * LATENT + offs_v[None, :], acc, mask=head_ok[:, None])
    tl.store(m_ptr + slot_h, m_i, mask=head_ok)
    tl.store(l_ptr + slot_h, l_i, mask=head_ok)


def kernel(q, kv_cache, indices, cu_seqlens_q, sm_scale, d_v):
    rows, heads, d_qk = q.shape
    topk = indices.shape[1]
    q, kv_cache, indices = q.contiguous(), kv_cache.contiguous(), indices.contiguous()
    block_n = 32 if d_v >= 128 else 16
    latent = triton.next_power_of_2(d_v)
    head_blocks = triton.cdiv(heads, BLOCK_H)
    # The SMs shared out among the batch's (row, head block) pairs: one split once they fill the GPU.
    num_splits = max(1, min(MAX_SPLITS, _sm_count(q.device) // (rows * head_blocks)))
    per_split = triton.cdiv(triton.cdiv(topk, block_n), num_splits) * block_n
    acc = torch.empty((num_splits, rows, heads, latent), device=q.device, dtype=torch.float32)
    m = torch.empty((num_splits, rows, heads), device=q.device, dtype=torch.float32)
    l_sum = torch.empty_like(m)
    _sparse_mla_split[(rows, head_blocks, num_splits)](
        q,
        kv_cache,
        indices,
        acc,
        m,
        l_sum,
        sm_scale * LOG2E,
        rows,
        heads,
        topk,
        d_qk,
        d_v,
        per_split,
        BLOCK_H=BLOCK_H,
        BLOCK_N=block_n,
        LATENT=latent,
        ROPE=max(16, triton.next_power_of_2(d_qk - d_v)),
        num_warps=8 if d_v >= 128 else 4,
    )
    # Merge the splits at the common max; a split with no used entry has m = -inf and weighs 0.
    m_max = m.max(dim=0).values
    m_max = torch.where(torch.isinf(m_max), torch.zeros_like(m_max), m_max)
    scale = torch.exp2(m - m_max)
    total = (l_sum * scale).sum(dim=0)
    out = (acc * scale[..., None]).sum(dim=0) / torch.where(total > 0, total, 1.0)[..., None]
    return out[..., :d_v].to(q.dtype)
