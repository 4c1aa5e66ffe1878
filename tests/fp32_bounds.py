"""How far two fp32 formulations of the same sums may land apart, from the arithmetic, not the machine.

Two fp32 computations of one sum differ by reassociation, and by how much depends on the CPU's BLAS
path (blocking, FMA, vector width): a fixed ``atol`` written on one machine fails on another. A sum of
n products ``Σ aᵢbᵢ`` in fp32, in any order, is off by more than ``λ·√n·u·Σ|aᵢbᵢ|`` only with a
probability that falls as exp(-λ²/2) (u = 2⁻²⁴; Higham and Mary's probabilistic bound, here λ = 3);
the worst case ``n·u·Σ|aᵢbᵢ|`` is √n looser, too loose to tell a wrong mask or a missing key from
rounding at the lengths the tests use.
"""

from __future__ import annotations

import torch

U = torch.finfo(torch.float32).eps / 2
LAMBDA = 3.0


def attention_bound(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float, causal: bool = False
) -> torch.Tensor:
    """Per element of ``softmax(q·kᵀ·scale)·v``, how far two fp32 formulations of it may differ.

    q ``[..., M, D]``, k ``[..., N, D]``, v ``[..., N, Dv]``; with a head axis (``-3``), grouped
    query heads share a kv head. ``causal`` aligns the last query with the last key. A score error δ
    moves each weight pⱼ by at most 2δ·pⱼ, so an output moves by (2·maxⱼ δⱼ + λ·√N·u + a few u for
    exp and the division)·Σⱼ pⱼ|vⱼ|; each of the two formulations may be off by that much.
    """
    q, k, v = q.double(), k.double(), v.double()
    if q.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    m, n = q.shape[-2], k.shape[-2]
    if n == 0:  # no key: both formulations give exact zeros
        return torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=torch.float64)
    visible = torch.ones(m, n, dtype=torch.bool)
    if causal:
        visible = visible.tril(n - m)
    scores = (q @ k.mT * sm_scale).masked_fill(~visible, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a query that sees no key gives zeros
    magnitudes = (q.abs() @ k.abs().mT * abs(sm_scale)).masked_fill(~visible, 0.0)
    score_err = LAMBDA * q.shape[-1] ** 0.5 * U * magnitudes.amax(dim=-1, keepdim=True)
    sum_err = LAMBDA * visible.sum(dim=-1, keepdim=True).double().sqrt() * U
    return 2 * (2 * score_err + sum_err + 4 * U) * (weights @ v.abs())


def matmul_bound(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per element of ``a @ b``, how far two fp32 formulations of it (or one and the exact product
    rounded once) may differ: each is off by ``λ·√K·u·(|a|·|b|)``, K the reduction length."""
    return 2 * LAMBDA * a.shape[-1] ** 0.5 * U * (a.double().abs() @ b.double().abs())


def paged_decode_bound(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
) -> torch.Tensor:
    """:func:`attention_bound` of every request of a paged decode batch (attention_decode's layout:
    q ``[B, Hq, D]``, caches ``[pages, page, Hkv, D]``) over the tokens its block table names."""
    page = k_cache.shape[1]
    bounds = []
    for i, n in enumerate(seq_lens.tolist()):
        tokens = torch.arange(n)
        pages, slots = block_table[i, tokens // page].long(), tokens % page
        k, v = k_cache[pages, slots].transpose(0, 1), v_cache[pages, slots].transpose(0, 1)
        bounds.append(attention_bound(q[i].unsqueeze(1), k, v, sm_scale).squeeze(1))
    return torch.stack(bounds)


def latent_decode_bound(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
) -> torch.Tensor:
    """:func:`attention_bound` of every request of an absorbed-MLA decode batch (mla_decode's layout):
    keys ``[ckv; kpe]`` of its own pages, values their ``ckv``."""
    page = ckv_cache.shape[1]
    bounds = []
    for i, n in enumerate(seq_lens.tolist()):
        pages = block_table[i, : -(-n // page)].long()
        ckv = ckv_cache[pages].reshape(-1, ckv_cache.shape[2])[:n]
        kpe = kpe_cache[pages].reshape(-1, kpe_cache.shape[2])[:n]
        q = torch.cat([q_nope[i], q_pe[i]], dim=-1)
        bounds.append(attention_bound(q, torch.cat([ckv, kpe], dim=-1), ckv, sm_scale))
    return torch.stack(bounds)


def assert_within(got: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor, what: str = "") -> None:
    """``got`` equals ``expected`` up to ``bound`` in every element (a NaN is outside)."""
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, expected.shape)
    diff = (got.double() - expected.double()).abs()
    outside = ~(diff <= bound)
    worst = float((diff / bound).nan_to_num(float("inf")).max()) if outside.any() else 0.0
    assert not outside.any(), (
        f"{what}: {int(outside.sum())}/{diff.numel()} elements outside the reassociation bound, "
        f"the worst {worst:.3g}× it"
    )
