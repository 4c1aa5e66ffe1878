"""MoE in PyTorch, token by token."""

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
    y = torch.empty_like(x)
    for t in range(x.shape[0]):
        acc = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
        for s in range(top_k):
            acc += weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, int(ids[t, s]))[0]
        y[t] = acc.to(x.dtype)
    return y
