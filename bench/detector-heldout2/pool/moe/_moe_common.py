"""Routing and per-row expert kernels shared by the MoE candidates."""
import torch
import triton
import triton.language as tl


def route(router_logits, top_k):
    """softmax over experts, top-k, renormalise (sum over k done column by column)."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    w, ids = torch.topk(probs, top_k, dim=-1)
    s = w[:, 0].clone()
    for j in range(1, top_k):
        s = s + w[:, j]
    return w / s[:, None], ids


def combine_slots(rows, weights, T, top_k):
    """rows [T*top_k, H] fp32 in (token, slot) order -> y [T, H] summed in slot order."""
    rows = rows.view(T, top_k, -1)
    y = weights[:, 0, None] * rows[:, 0]
    for j in range(1, top_k):
        y = y + weights[:, j, None] * rows[:, j]
    return y


@triton.jit
def expert_rows(x_ptr, wgu_ptr, wd_ptr, tok_ptr, eid_ptr, out_ptr, H, I,
                BH: tl.constexpr, BI: tl.constexpr, SPLIT_I: tl.constexpr):
    """out[split, r] = partial down-projection of expert eid[r] applied to x[tok[r]]
    over the split's share of the intermediate dim."""
    r = tl.program_id(0)
    sp = tl.program_id(1)
    n_rows = tl.num_programs(0)
    tok = tl.load(tok_ptr + r).to(tl.int64)
    e = tl.load(eid_ptr + r).to(tl.int64)
    offs_h = tl.arange(0, BH)
    hm = offs_h < H
    x = tl.load(x_ptr + tok * H + offs_h, mask=hm, other=0.0).to(tl.float32)
    acc = tl.zeros([BH], dtype=tl.float32)
    i_per = tl.cdiv(tl.cdiv(I, SPLIT_I), BI) * BI
    i_lo = sp * i_per
    i_hi = tl.minimum(I, i_lo + i_per)
    g_base = wgu_ptr + e * (2 * I * H)
    d_base = wd_ptr + e * (H * I)
    for i0 in range(i_lo, i_hi, BI):
        offs_i = i0 + tl.arange(0, BI)
        im = offs_i < i_hi
        wm = im[:, None] & hm[None, :]
        wg = tl.load(g_base + offs_i[:, None] * H + offs_h[None, :], mask=wm, other=0.0).to(tl.float32)
        wu = tl.load(g_base + (I + offs_i)[:, None] * H + offs_h[None, :], mask=wm, other=0.0).to(tl.float32)
        g = tl.sum(wg * x[None, :], axis=1)
        u = tl.sum(wu * x[None, :], axis=1)
        h = g / (1.0 + tl.exp(-g)) * u
        h = tl.where(im, h, 0.0)
        wd = tl.load(d_base + offs_h[:, None] * I + offs_i[None, :], mask=hm[:, None] & im[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(wd * h[None, :], axis=1)
    tl.store(out_ptr + (sp * n_rows + r) * H + offs_h, acc, mask=hm)


def run_expert_rows(x, w_gate_up, w_down, tok, eid, split_i=1, bi=32):
    """Expert outputs for rows (tok[r], eid[r]); partial splits summed in order."""
    H = x.shape[1]
    I = w_down.shape[2]
    R = tok.numel()
    out = torch.empty((split_i, R, H), dtype=torch.float32, device=x.device)
    if R == 0:
        return out[0]
    expert_rows[(R, split_i)](x.contiguous(), w_gate_up, w_down, tok.int().contiguous(),
                              eid.int().contiguous(), out, H, I,
                              BH=triton.next_power_of_2(H), BI=bi, SPLIT_I=split_i)
    acc = out[0]
    for s in range(1, split_i):
        acc = acc + out[s]
    return acc
