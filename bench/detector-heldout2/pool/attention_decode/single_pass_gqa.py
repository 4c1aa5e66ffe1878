"""Paged decode, one program per (request, KV head) covering its query group.

The program walks its own pages one page at a time; the batch only sizes the
grid.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _gqa_decode(q_ptr, kc_ptr, vc_ptr, bt_ptr, sl_ptr, o_ptr, Hq, Hkv, maxp,
                s_kp, s_ks, s_kh, sm_scale,
                G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr):
    b = tl.program_id(0)
    hk = tl.program_id(1)
    L = tl.load(sl_ptr + b)
    offs_g = tl.arange(0, GP)
    offs_d = tl.arange(0, D)
    offs_p = tl.arange(0, PAGE)
    gmask = offs_g < G
    heads = hk * G + offs_g
    q = tl.load(q_ptr + (b * Hq + heads)[:, None] * D + offs_d[None, :], mask=gmask[:, None], other=0.0).to(tl.float32)
    m = tl.full([GP], -1.0e30, tl.float32)
    l = tl.zeros([GP], dtype=tl.float32)
    acc = tl.zeros([GP, D], dtype=tl.float32)
    n_pages = tl.cdiv(L, PAGE)
    for pi in range(0, n_pages):
        page = tl.load(bt_ptr + b * maxp + pi).to(tl.int64)
        tok = pi * PAGE + offs_p
        tmask = tok < L
        base = page * s_kp + offs_p * s_ks + hk * s_kh
        k = tl.load(kc_ptr + base[:, None] + offs_d[None, :], mask=tmask[:, None], other=0.0).to(tl.float32)
        v = tl.load(vc_ptr + base[:, None] + offs_d[None, :], mask=tmask[:, None], other=0.0).to(tl.float32)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * sm_scale
        s = tl.where(tmask[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    out = acc / l[:, None]
    tl.store(o_ptr + (b * Hq + heads)[:, None] * D + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=gmask[:, None])


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, Hq, D = q.shape
    _, PAGE, Hkv, _ = k_cache.shape
    G = Hq // Hkv
    o = torch.empty_like(q)
    _gqa_decode[(B, Hkv)](q.contiguous(), k_cache, v_cache, block_table, seq_lens, o,
                          Hq, Hkv, block_table.shape[1],
                          k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), sm_scale,
                          G=G, GP=triton.next_power_of_2(G), D=D, PAGE=PAGE)
    return o
