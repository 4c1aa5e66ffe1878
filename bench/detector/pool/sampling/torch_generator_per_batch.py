"""Top-k/top-p sampling in PyTorch with one generator per batch."""

import torch


def _filtered_cdf(logits, temperature, top_k, top_p):
    """Sorted order and the cumulative kept mass per row (top-k, then top-p, renormalised)."""
    vocab = logits.shape[1]
    greedy = temperature <= 0
    z = logits.double() / torch.where(greedy, 1.0, temperature.double())[:, None]
    z_sorted, order = torch.sort(z, dim=1, descending=True, stable=True)
    k = torch.where((top_k <= 0) | (top_k > vocab), vocab, top_k).long()
    in_top_k = z_sorted >= z_sorted.gather(1, (k - 1)[:, None])
    e = torch.exp(z_sorted - z_sorted[:, :1]) * in_top_k
    q = e / e.sum(dim=1, keepdim=True)
    keep = in_top_k & (torch.cumsum(q, dim=1) - q < top_p.double()[:, None])
    return order, torch.cumsum(q * keep, dim=1)


def kernel(logits, temperature, top_k, top_p, seed):
    order, cdf = _filtered_cdf(logits, temperature, top_k, top_p)
    gen = torch.Generator(device="cpu").manual_seed(int(seed[0]))
    u = torch.rand(logits.shape[0], generator=gen, dtype=torch.float64).to(logits.device)
    pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=logits.shape[1] - 1)
    drawn = order.gather(1, pick).squeeze(1)
    return torch.where(temperature <= 0, logits.argmax(dim=1), drawn)
