"""Paged decode in PyTorch, request by request over its own pages."""
import torch


def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    B, Hq, D = q.shape
    _, PAGE, Hkv, _ = k_cache.shape
    g = Hq // Hkv
    out = torch.empty_like(q)
    for i, L in enumerate(seq_lens.tolist()):
        n_pages = (L + PAGE - 1) // PAGE
        pages = block_table[i, :n_pages].long()
        k = k_cache[pages].reshape(-1, Hkv, D)[:L].float()      # [L,Hkv,D]
        v = v_cache[pages].reshape(-1, Hkv, D)[:L].float()
        qi = q[i].float().view(Hkv, g, D)
        s = torch.einsum("hgd,lhd->hgl", qi, k) * sm_scale
        p = torch.softmax(s, dim=-1)
        out[i] = torch.einsum("hgl,lhd->hgd", p, v).reshape(Hq, D).to(q.dtype)
    return out
