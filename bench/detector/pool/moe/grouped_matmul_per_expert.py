"""MoE in PyTorch: tokens grouped by expert, one matmul per expert."""

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
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w_down.shape[0]).tolist()
    start = 0
    for e, n in enumerate(counts):
        pairs = order[start : start + n]
        start += n
        if n == 0:
            continue
        tokens, slots = pairs // top_k, pairs % top_k
        out = _expert(x[tokens], w_gate_up, w_down, e)
        y.index_add_(0, tokens, weights[tokens, slots, None] * out)
    return y.to(x.dtype)
