"""Pieces shared by the sampling candidates: sorted-row filtering and draws."""
import torch
import triton
import triton.language as tl


def sort_logits(logits):
    """Descending stable sort; ties keep the lower index first (argmax order)."""
    return torch.sort(logits.float(), dim=-1, descending=True, stable=True)


@triton.jit
def filtered_probs(x, offs, V, temp, top_k, top_p):
    """x: one row of descending-sorted logits. Returns renormalised kept probs."""
    valid = offs < V
    z = tl.where(valid, (x - tl.max(x, axis=0)) / temp, float("-inf"))
    e = tl.exp(z)
    probs = e / tl.sum(e, axis=0)
    keep = valid
    if top_k > 0:
        keep = keep & (offs < top_k)
    pk = tl.where(keep, probs, 0.0)
    pk = pk / tl.sum(pk, axis=0)
    cdf = tl.cumsum(pk, axis=0)
    keep = keep & ((cdf - pk) < top_p)
    pf = tl.where(keep, pk, 0.0)
    return pf, keep


@triton.jit
def inverse_cdf(pf, keep, u):
    total = tl.sum(pf, axis=0)
    cdf = tl.cumsum(pf, axis=0)
    n_keep = tl.sum(keep.to(tl.int32), axis=0)
    pos = tl.sum((cdf <= u * total).to(tl.int32), axis=0)
    return tl.minimum(pos, n_keep - 1)


@triton.jit
def sample_sorted_rows(sl_ptr, si_ptr, t_ptr, k_ptr, p_ptr, seed_ptr, out_ptr, V,
                       BLOCK: tl.constexpr, OFFSET_BY_ROW: tl.constexpr, GUMBEL: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(sl_ptr + row * V + offs, mask=offs < V, other=float("-inf"))
    temp = tl.load(t_ptr + row)
    seed = tl.load(seed_ptr + row)
    pos = tl.full([], 0, tl.int32)   # greedy: first entry of the descending sort
    if temp != 0.0:
        pf, keep = filtered_probs(x, offs, V, temp, tl.load(k_ptr + row), tl.load(p_ptr + row))
        if GUMBEL:
            u = tl.rand(seed, offs)
            g = tl.where(keep, tl.log(pf) - tl.log(-tl.log(u + 1e-20) + 1e-20), float("-inf"))
            pos = tl.argmax(g, axis=0)
        else:
            ctr = tl.arange(0, 1)
            if OFFSET_BY_ROW:
                ctr += row
            u = tl.sum(tl.rand(seed, ctr), axis=0)
            pos = inverse_cdf(pf, keep, u)
    tok = tl.load(si_ptr + row * V + pos)
    tl.store(out_ptr + row, tok)


def launch_sorted(logits, temperature, top_k, top_p, seed, offset_by_row=False, gumbel=False):
    B, V = logits.shape
    sl, si = sort_logits(logits)
    out = torch.empty(B, dtype=torch.int64, device=logits.device)
    sample_sorted_rows[(B,)](sl.contiguous(), si.contiguous(), temperature.float().contiguous(),
                             top_k.int().contiguous(), top_p.float().contiguous(),
                             seed.long().contiguous(), out, V, BLOCK=triton.next_power_of_2(V),
                             OFFSET_BY_ROW=offset_by_row, GUMBEL=gumbel)
    return out


def torch_filtered_row(logits_row, temp, k, p):
    """Eager filtering of one row; returns (kept probs in sorted order, sorted indices)."""
    sl, si = torch.sort(logits_row.float(), descending=True, stable=True)
    probs = torch.softmax(sl / temp, dim=-1)
    if k > 0:
        probs[k:] = 0
    probs = probs / probs.sum()
    cdf = torch.cumsum(probs, dim=-1)
    probs = torch.where(cdf - probs < p, probs, torch.zeros_like(probs))
    return probs, si


def draw_from(probs, si, u):
    cdf = torch.cumsum(probs, dim=-1)
    n_keep = int((probs > 0).sum())
    pos = min(int((cdf <= u * cdf[-1]).sum()), n_keep - 1)
    return si[pos]
