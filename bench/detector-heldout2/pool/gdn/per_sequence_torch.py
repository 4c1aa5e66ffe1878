"""Gated delta rule in PyTorch, one sequence at a time, all heads together."""
import torch


def _one(q, k, v, g, beta, scale):
    # q,k [T,H,Dk], v [T,H,Dv], g,beta [T,H]
    T, H, Dk = q.shape
    Dv = v.shape[-1]
    S = torch.zeros(H, Dk, Dv, dtype=torch.float32, device=q.device)
    o = torch.empty(T, H, Dv, dtype=torch.float32, device=q.device)
    for t in range(T):
        S = S * torch.exp(g[t])[:, None, None]
        kt = k[t].float()
        kS = torch.bmm(kt[:, None, :], S)[:, 0]
        u = beta[t][:, None] * (v[t].float() - kS)
        S = S + kt[:, :, None] * u[:, None, :]
        o[t] = torch.bmm(q[t].float()[:, None, :], S)[:, 0] * scale
    return o


def kernel(q, k, v, g, beta, scale):
    out = torch.empty_like(v)
    for b in range(q.shape[0]):
        out[b] = _one(q[b], k[b], v[b], g[b].float(), beta[b].float(), scale).to(v.dtype)
    return out
