"""MoE as a grouped GEMM over expert-sorted, block-padded assignments.

Assignments are sorted by expert and each expert's group is padded to
BLOCK_M rows (moe_align_block_size style). Tile sizes are fixed, so a row's
dot products are the same wherever it lands inside a block.
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _moe_common import combine_slots, route  # noqa: E402

BLOCK_M, BLOCK_N, BLOCK_K = 16, 32, 32


@triton.jit
def _gate_up(x_ptr, w_ptr, rows_ptr, bexp_ptr, h_ptr, H, I,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(bexp_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BM + tl.arange(0, BM)
    src = tl.load(rows_ptr + offs_m)
    valid = src >= 0
    offs_n = pid_n * BN + tl.arange(0, BN)
    nm = offs_n < I
    g = tl.zeros([BM, BN], dtype=tl.float32)
    u = tl.zeros([BM, BN], dtype=tl.float32)
    wbase = w_ptr + e * (2 * I * H)
    for k0 in range(0, H, BK):
        kk = k0 + tl.arange(0, BK)
        km = kk < H
        a = tl.load(x_ptr + src[:, None].to(tl.int64) * H + kk[None, :], mask=valid[:, None] & km[None, :], other=0.0)
        wg = tl.load(wbase + offs_n[None, :] * H + kk[:, None], mask=nm[None, :] & km[:, None], other=0.0)
        wu = tl.load(wbase + (I + offs_n)[None, :] * H + kk[:, None], mask=nm[None, :] & km[:, None], other=0.0)
        g = tl.dot(a, wg, g)
        u = tl.dot(a, wu, u)
    h = g / (1.0 + tl.exp(-g)) * u
    tl.store(h_ptr + offs_m[:, None] * I + offs_n[None, :], h, mask=nm[None, :])


@triton.jit
def _down(h_ptr, w_ptr, bexp_ptr, out_ptr, H, I,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(bexp_ptr + pid_m).to(tl.int64)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    nm = offs_n < H
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    wbase = w_ptr + e * (H * I)
    for k0 in range(0, I, BK):
        kk = k0 + tl.arange(0, BK)
        km = kk < I
        a = tl.load(h_ptr + offs_m[:, None] * I + kk[None, :], mask=km[None, :], other=0.0)
        w = tl.load(wbase + offs_n[None, :] * I + kk[:, None], mask=nm[None, :] & km[:, None], other=0.0).to(tl.float32)
        acc = tl.dot(a, w, acc)
    tl.store(out_ptr + offs_m[:, None] * H + offs_n[None, :], acc, mask=nm[None, :])


def _align(ids_flat, E):
    """Sorted, block-padded row map: rows[i] = assignment index or -1; expert per block."""
    order = torch.argsort(ids_flat, stable=True)
    counts = torch.bincount(ids_flat, minlength=E).tolist()
    rows, bexp, start = [], [], 0
    for e, c in enumerate(counts):
        if c == 0:
            continue
        nblk = triton.cdiv(c, BLOCK_M)
        grp = order[start:start + c]
        pad = torch.full((nblk * BLOCK_M - c,), -1, dtype=torch.long, device=ids_flat.device)
        rows.append(torch.cat([grp, pad]))
        bexp += [e] * nblk
        start += c
    return torch.cat(rows), torch.tensor(bexp, dtype=torch.int32, device=ids_flat.device)


def kernel(x, router_logits, w_gate_up, w_down, top_k):
    T, H = x.shape
    E, twoI, _ = w_gate_up.shape
    I = twoI // 2
    weights, ids = route(router_logits, top_k)
    flat = ids.reshape(-1)
    rows, bexp = _align(flat, E)
    src_tok = torch.where(rows >= 0, rows // top_k, torch.full_like(rows, -1)).int()
    n_pad = rows.numel()
    h = torch.empty((n_pad, I), dtype=torch.float32, device=x.device)
    out = torch.empty((n_pad, H), dtype=torch.float32, device=x.device)
    nblk = bexp.numel()
    _gate_up[(nblk, triton.cdiv(I, BLOCK_N))](x.contiguous(), w_gate_up, src_tok, bexp, h, H, I,
                                              BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)
    _down[(nblk, triton.cdiv(H, BLOCK_N))](h, w_down, bexp, out, H, I,
                                           BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)
    per_assign = torch.empty((T * top_k, H), dtype=torch.float32, device=x.device)
    valid = rows >= 0
    per_assign[rows[valid]] = out[valid]
    return combine_slots(per_assign, weights, T, top_k).to(x.dtype)
