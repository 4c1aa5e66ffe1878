"""Gated delta rule in PyTorch: chunkwise-parallel form for many tokens,
step-by-step recurrence for short workloads.

The chunked form (WY-style, chunk 16) turns the recurrence into matmuls and
a unit-triangular solve per chunk; it pays off once the batch has >= 128
tokens in total.
"""
import torch

CHUNK = 16
CHUNKED_MIN_TOKENS = 128


def _recurrent(q, k, v, g, beta, scale):
    # [B,H,T,D] layout
    B, H, T, Dk = q.shape
    S = q.new_zeros(B, H, Dk, v.shape[-1])
    o = torch.empty_like(v)
    for t in range(T):
        S = S * torch.exp(g[:, :, t])[..., None, None]
        kt = k[:, :, t]
        u = beta[:, :, t, None] * (v[:, :, t] - torch.einsum("bhk,bhkv->bhv", kt, S))
        S = S + kt[..., :, None] * u[..., None, :]
        o[:, :, t] = scale * torch.einsum("bhk,bhkv->bhv", q[:, :, t], S)
    return o


def _chunked(q, k, v, g, beta, scale):
    B, H, T, Dk = q.shape
    Dv = v.shape[-1]
    pad = (-T) % CHUNK
    if pad:
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        g, beta = (torch.nn.functional.pad(t, (0, pad)) for t in (g, beta))
    n = q.shape[2] // CHUNK
    q, k, v = (t.view(B, H, n, CHUNK, -1) for t in (q, k, v))
    g, beta = g.view(B, H, n, CHUNK), beta.view(B, H, n, CHUNK)
    S = q.new_zeros(B, H, Dk, Dv)
    o = torch.empty_like(v)
    tri = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device)
    strict = tri.tril(-1)
    incl = tri.tril()
    eye = torch.eye(CHUNK, dtype=q.dtype, device=q.device)
    for c in range(n):
        qc, kc, vc, bc = q[:, :, c], k[:, :, c], v[:, :, c], beta[:, :, c]
        G = torch.cumsum(g[:, :, c], dim=-1)
        diff = G[..., :, None] - G[..., None, :]
        dec_strict = torch.where(strict, diff, torch.full_like(diff, float("-inf"))).exp()
        dec_incl = torch.where(incl, diff, torch.full_like(diff, float("-inf"))).exp()
        A = bc[..., :, None] * dec_strict * (kc @ kc.transpose(-1, -2))
        rhs = bc[..., None] * (vc - G.exp()[..., None] * (kc @ S))
        U = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        o[:, :, c] = scale * (G.exp()[..., None] * (qc @ S) + (dec_incl * (qc @ kc.transpose(-1, -2))) @ U)
        last = G[..., -1:]
        S = last.exp()[..., None] * S + (kc * (last - G).exp()[..., None]).transpose(-1, -2) @ U
    return o.view(B, H, n * CHUNK, Dv)[:, :, :T]


def kernel(q, k, v, g, beta, scale):
    B, T = q.shape[:2]
    args = [t.float().transpose(1, 2) for t in (q, k, v)] + [t.float().transpose(1, 2) for t in (g, beta)]
    fn = _chunked if B * T >= CHUNKED_MIN_TOKENS else _recurrent
    o = fn(*args, scale)
    return o.transpose(1, 2).contiguous().to(v.dtype)
