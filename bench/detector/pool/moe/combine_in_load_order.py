"""MoE in PyTorch; experts are scheduled busiest first."""

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
    y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    load = torch.bincount(ids.reshape(-1), minlength=w_down.shape[0])
    for e in torch.argsort(load, descending=True, stable=True).tolist():
        tokens, slots = torch.nonzero(ids == e, as_tuple=True)
        for t, s in zip(tokens.tolist(), slots.tolist(), strict=True):
            y[t] += weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, e)[0]
    return y.to(x.dtype)
