"""Sampling in PyTorch with one generator for the whole batch.

The batch's uniforms come from a single generator seeded by the first
request's seed (one RNG call instead of B).
"""
import torch


def kernel(logits, temperature, top_k, top_p, seed):
    B, V = logits.shape
    g = torch.Generator(device=logits.device)
    g.manual_seed(int(seed[0]))
    u = torch.rand(B, generator=g, device=logits.device)
    sl, si = torch.sort(logits.float(), dim=-1, descending=True, stable=True)
    t = temperature.float().clamp_min(1e-6)[:, None]
    probs = torch.softmax(sl / t, dim=-1)
    ranks = torch.arange(V, device=logits.device)[None, :]
    k = top_k.long()[:, None]
    probs = torch.where((k == 0) | (ranks < k), probs, torch.zeros_like(probs))
    probs = probs / probs.sum(-1, keepdim=True)
    cdf = torch.cumsum(probs, dim=-1)
    probs = torch.where(cdf - probs < top_p[:, None], probs, torch.zeros_like(probs))
    cdf = torch.cumsum(probs, dim=-1)
    n_keep = (probs > 0).sum(-1)
    pos = (cdf <= (u * cdf[:, -1])[:, None]).sum(-1)
    pos = torch.minimum(pos, n_keep - 1)
    pos = torch.where(temperature == 0, torch.zeros_like(pos), pos)
    return si.gather(1, pos[:, None]).squeeze(1)
