"""Recurrent gated-delta-rule Triton kernel shared by the gdn candidates."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _decay(g, USE_EXP2: tl.constexpr):
    if USE_EXP2:
        return tl.exp2(g * 1.4426950408889634)
    return tl.exp(g)


@triton.jit
def gdn_recurrent(q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, o_ptr, cu_ptr, T, Hh, scale,
                  DK: tl.constexpr, DV: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                  VARLEN: tl.constexpr, USE_EXP2: tl.constexpr, LAZY: tl.constexpr,
                  DK_HALVES: tl.constexpr):
    """One program per (sequence, head, value block). State S[BK, BV] in registers."""
    pid_v = tl.program_id(0)
    bh = tl.program_id(1)
    n = bh // Hh
    h = bh % Hh
    if VARLEN:
        bos = tl.load(cu_ptr + n).to(tl.int64)
        eos = tl.load(cu_ptr + n + 1).to(tl.int64)
    else:
        bos = n.to(tl.int64) * T
        eos = bos + T
    offs_k = tl.arange(0, BK)
    offs_v = pid_v * BV + tl.arange(0, BV)
    km = offs_k < DK
    vm = offs_v < DV
    S = tl.zeros([BK, BV], dtype=tl.float32)
    for t in range(bos, eos):
        row = t * Hh + h
        k = tl.load(k_ptr + row * DK + offs_k, mask=km, other=0.0).to(tl.float32)
        q = tl.load(q_ptr + row * DK + offs_k, mask=km, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + row * DV + offs_v, mask=vm, other=0.0).to(tl.float32)
        dec = _decay(tl.load(g_ptr + row), USE_EXP2)
        beta = tl.load(b_ptr + row)
        if LAZY:
            kS = dec * tl.sum(S * k[:, None], axis=0)
            S = S * dec
        else:
            S = S * dec
            if DK_HALVES:
                lo = offs_k < BK // 2
                kS = tl.sum(tl.where(lo[:, None], S * k[:, None], 0.0), axis=0) + \
                    tl.sum(tl.where(lo[:, None], 0.0, S * k[:, None]), axis=0)
            else:
                kS = tl.sum(S * k[:, None], axis=0)
        u = beta * (v - kS)
        S = S + k[:, None] * u[None, :]
        o = tl.sum(S * q[:, None], axis=0) * scale
        tl.store(o_ptr + row * DV + offs_v, o.to(o_ptr.dtype.element_ty), mask=vm)


def launch(q, k, v, g, beta, scale, bv=None, varlen_cu=None, use_exp2=False, lazy=False,
           dk_halves=False):
    B, T, Hh, Dk = q.shape
    Dv = v.shape[-1]
    bv = bv or min(32, triton.next_power_of_2(Dv))
    o = torch.empty_like(v)
    n_seq = B if varlen_cu is None else varlen_cu.numel() - 1
    cu = varlen_cu if varlen_cu is not None else torch.zeros(1, dtype=torch.int32, device=q.device)
    grid = (triton.cdiv(Dv, bv), n_seq * Hh)
    gdn_recurrent[grid](q.contiguous(), k.contiguous(), v.contiguous(), g.float().contiguous(),
                        beta.float().contiguous(), o, cu, T, Hh, scale,
                        DK=Dk, DV=Dv, BK=triton.next_power_of_2(Dk), BV=bv,
                        VARLEN=varlen_cu is not None, USE_EXP2=use_exp2, LAZY=lazy,
                        DK_HALVES=dk_halves)
    return o
