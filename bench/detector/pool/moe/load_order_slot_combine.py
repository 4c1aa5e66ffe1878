"""MoE in PyTorch; busiest experts first, combine in slot order."""

import torch


def _route(router_logits, top_k):
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids


def _expert(rows, w_gate_up, w_down, e):
    inter = w_down.shape[2]
    gate_up = rows.float() @ w_gate_up[e].float().t()
    act = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
    return act @ w_down[e].float().t()


def kernel(x, router_logits, w_gate_up, w_down, top_k):
    weights, ids = _route(router_logits, top_k)
    n_tokens, hidden = x.shape
    per_slot = torch.zeros((n_tokens, top_k, hidden), dtype=torch.float32, device=x.device)
    load = torch.bincount(ids.reshape(-1), minlength=w_down.shape[0])
    for e in torch.argsort(load, descending=True, stable=True).tolist():
        tokens, slots = torch.nonzero(ids == e, as_tuple=True)
        for t, s in zip(tokens.tolist(), slots.tolist(), strict=True):
            per_slot[t, s] = _expert(x[t : t + 1], w_gate_up, w_down, e)[0]
    y = torch.zeros((n_tokens, hidden), dtype=torch.float32, device=x.device)
    for s in range(top_k):
        y += weights[:, s, None] * per_slot[:, s]
    return y.to(x.dtype)
