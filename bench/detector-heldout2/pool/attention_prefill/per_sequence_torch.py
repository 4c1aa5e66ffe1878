"""Prefill attention in PyTorch, one sequence at a time (bounded memory)."""
import torch


def _one(q, k, v, causal, sm_scale, mask):
    # q [Hq,S,D], k/v [Hkv,S,D]
    rep = q.shape[0] // k.shape[0]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
    s = torch.bmm(q.float(), k.float().transpose(1, 2)) * sm_scale
    if causal:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.bmm(p, v.float())


def kernel(q, k, v, causal, sm_scale):
    B, Hq, S, D = q.shape
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    out = torch.empty_like(q)
    for b in range(B):
        out[b] = _one(q[b], k[b], v[b], causal, sm_scale, mask).to(q.dtype)
    return out
