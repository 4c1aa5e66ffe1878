"""Paged-KV decode building blocks shared by the decode candidates."""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_range(q, kc_ptr, vc_ptr, bt_row, hk, lo, hi, s_kp, s_ks, s_kh, sm_scale,
                 D: tl.constexpr, PAGE: tl.constexpr, BN: tl.constexpr):
    """Online softmax of one query head over tokens [lo, hi) of one request."""
    offs_d = tl.arange(0, D)
    m = tl.full([], -1.0e30, tl.float32)
    l = tl.full([], 0.0, tl.float32)
    acc = tl.zeros([D], dtype=tl.float32)
    for start in range(lo, hi, BN):
        offs = start + tl.arange(0, BN)
        tmask = offs < hi
        page = tl.load(bt_row + offs // PAGE, mask=tmask, other=0).to(tl.int64)
        base = page * s_kp + (offs % PAGE) * s_ks + hk * s_kh
        k = tl.load(kc_ptr + base[:, None] + offs_d[None, :], mask=tmask[:, None], other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * sm_scale
        s = tl.where(tmask, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        l = l * alpha + tl.sum(p, axis=0)
        v = tl.load(vc_ptr + base[:, None] + offs_d[None, :], mask=tmask[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    return acc, m, l


@triton.jit
def decode_split_kernel(q_ptr, kc_ptr, vc_ptr, bt_ptr, sl_ptr, acc_ptr, ml_ptr,
                        Hq, Hkv, maxp, split_arg, s_kp, s_ks, s_kh, sm_scale,
                        D: tl.constexpr, PAGE: tl.constexpr, BN: tl.constexpr,
                        FIXED_COUNT: tl.constexpr):
    """Partial (acc, m, l) of split s of request b, head h.

    FIXED_COUNT: split_arg is the number of splits and each request's length is
    divided into that many parts; otherwise split_arg is the split size in tokens.
    """
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    ns = tl.num_programs(2)
    L = tl.load(sl_ptr + b)
    if FIXED_COUNT:
        size = tl.cdiv(tl.cdiv(L, split_arg), BN) * BN
    else:
        size = split_arg
    lo = s * size
    hi = tl.minimum(L, lo + size)
    hk = h // (Hq // Hkv)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + (b * Hq + h) * D + offs_d).to(tl.float32)
    acc, m, l = decode_range(q, kc_ptr, vc_ptr, bt_ptr + b * maxp, hk, lo, hi,
                             s_kp, s_ks, s_kh, sm_scale, D, PAGE, BN)
    row = (b * Hq + h) * ns + s
    tl.store(acc_ptr + row * D + offs_d, acc)
    tl.store(ml_ptr + row * 2, m)
    tl.store(ml_ptr + row * 2 + 1, l)


def merge_splits(acc, ml):
    """acc [B,Hq,NS,D], ml [B,Hq,NS,2] -> unnormalised (num [B,Hq,D], den [B,Hq])."""
    m, l = ml[..., 0], ml[..., 1]
    m_max = m.max(dim=2).values
    num = torch.zeros_like(acc[:, :, 0])
    den = torch.zeros_like(l[:, :, 0])
    for s in range(acc.shape[2]):
        w = torch.exp(m[:, :, s] - m_max)
        num = num + w[..., None] * acc[:, :, s]
        den = den + w * l[:, :, s]
    return num, den


def finalize(num, den, dtype):
    return (num / den[..., None]).to(dtype)


def launch_split(q, k_cache, v_cache, block_table, seq_lens, sm_scale, n_split, split_arg,
                 fixed_count, bn=16):
    B, Hq, D = q.shape
    _, PAGE, Hkv, _ = k_cache.shape
    acc = torch.empty((B, Hq, n_split, D), dtype=torch.float32, device=q.device)
    ml = torch.empty((B, Hq, n_split, 2), dtype=torch.float32, device=q.device)
    decode_split_kernel[(B, Hq, n_split)](
        q.contiguous(), k_cache, v_cache, block_table, seq_lens, acc, ml,
        Hq, Hkv, block_table.shape[1], split_arg,
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), sm_scale,
        D=D, PAGE=PAGE, BN=bn, FIXED_COUNT=fixed_count)
    return acc, ml
