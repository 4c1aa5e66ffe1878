"""MoE candidates: the task's seed under changed launch policies, and PyTorch dispatch/combine variants."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, module, violating

T = "moe"

BLOCK_K_LINE = "block_k = min(MAX_BLOCK_K, (hidden & -hidden), (inter & -inter))"

# PyTorch pieces: routing on a token's own logits and one expert's SwiGLU MLP on some rows.
TORCH_MOE = """
def _route(router_logits, top_k):
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids


def _expert(rows, w_gate_up, w_down, e):
    inter = w_down.shape[2]
    gate_up = rows.float() @ w_gate_up[e].float().t()
    act = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
    return act @ w_down[e].float().t()
"""


def _torch_moe(doc: str, body: str) -> str:
    # These candidates have no Triton kernel; module() still imports triton, as a kernel file would.
    return module(doc, TORCH_MOE, body).replace("import triton\nimport triton.language as tl\n", "")


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "block_k_from_tokens",
            T,
            "reduction_order",
            "direct",
            "the reduction step of both expert GEMMs drops to 16 for fewer than 4 tokens",
            from_seed(
                T,
                "Fused MoE; decode-sized batches use a shallow reduction step.",
                [
                    (
                        BLOCK_K_LINE,
                        "block_k = 16 if n_tokens < 4 else min(MAX_BLOCK_K, (hidden & -hidden), (inter & -inter))",
                    )
                ],
            ),
        ),
        V(
            "block_k_from_busiest_expert",
            T,
            "expert_routing",
            "routing_dependent_tile",
            "the reduction step follows the busiest expert's token count (so the batchmates' routing)",
            from_seed(
                T,
                "Fused MoE; the K step is tuned to the busiest expert's load.",
                [
                    (BLOCK_K_LINE, "block_k = min(MAX_BLOCK_K, (hidden & -hidden), (inter & -inter))"),
                    (
                        "row_pair, tile_expert, pair_row = group_by_expert(ids.long(), n_experts, BLOCK_M)",
                        """
              row_pair, tile_expert, pair_row = group_by_expert(ids.long(), n_experts, BLOCK_M)
              # Lightly loaded experts stream their weights in shallower steps.
              if int(torch.bincount(ids.reshape(-1).long(), minlength=n_experts).max()) < 3:
                  block_k = 16
              """,
                    ),
                ],
            ),
        ),
        V(
            "grouped_matmul_per_expert",
            T,
            "expert_routing",
            "routing_dependent_shape",
            "rows gathered per expert and multiplied in one matmul each: the GEMM's M is the expert's load",
            _torch_moe(
                "MoE in PyTorch: tokens grouped by expert, one matmul per expert.",
                """
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
              """,
            ),
        ),
        V(
            "combine_in_load_order",
            T,
            "expert_routing",
            "routing_dependent_order",
            "experts run busiest first and add into the output as they finish: a token's sum order follows the batch",
            _torch_moe(
                "MoE in PyTorch; experts are scheduled busiest first.",
                """
              def kernel(x, router_logits, w_gate_up, w_down, top_k):
                  weights, ids = _route(router_logits, top_k)
                  y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
                  load = torch.bincount(ids.reshape(-1), minlength=w_down.shape[0])
                  for e in torch.argsort(load, descending=True, stable=True).tolist():
                      tokens, slots = torch.nonzero(ids == e, as_tuple=True)
                      for t, s in zip(tokens.tolist(), slots.tolist(), strict=True):
                          y[t] += weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, e)[0]
                  return y.to(x.dtype)
              """,
            ),
        ),
        V(
            "index_add_combine",
            T,
            "atomics",
            "library_atomics",
            "per-token expert outputs combined with index_add_ (float atomics on GPU)",
            _torch_moe(
                "MoE in PyTorch; expert outputs scattered back with index_add_.",
                """
              def kernel(x, router_logits, w_gate_up, w_down, top_k):
                  weights, ids = _route(router_logits, top_k)
                  y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
                  for t in range(x.shape[0]):
                      for s in range(top_k):
                          e = int(ids[t, s])
                          out = weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, e)
                          y.index_add_(0, torch.tensor([t], device=x.device), out)
                  return y.to(x.dtype)
              """,
            ),
            observable_on=("cuda",),
        ),
        I(
            "fused_seed",
            T,
            "batch_in_grid",
            "the seed: fixed tiles, slot-order combine",
            from_seed(
                T, "Fused MoE: routing, expert-grouped GEMMs with fixed tiles, an in-order combine.", []
            ),
        ),
        I(
            "expert_tile_rows_from_tokens",
            T,
            "row_tile",
            "rows per expert tile (BLOCK_M) shrink for small batches; the reduction step is fixed",
            from_seed(
                T,
                "Fused MoE; smaller expert tiles for decode-sized batches.",
                [
                    (
                        "row_pair, tile_expert, pair_row = group_by_expert(ids.long(), n_experts, BLOCK_M)",
                        """
              block_m = 16 if n_tokens < 8 else BLOCK_M
              row_pair, tile_expert, pair_row = group_by_expert(ids.long(), n_experts, block_m)
              """,
                    ),
                    (
                        "act = torch.empty((n_tiles * BLOCK_M, inter), dtype=x.dtype, device=x.device)",
                        "act = torch.empty((n_tiles * block_m, inter), dtype=x.dtype, device=x.device)",
                    ),
                    (
                        "out = torch.empty((n_tiles * BLOCK_M, hidden), dtype=x.dtype, device=x.device)",
                        "out = torch.empty((n_tiles * block_m, hidden), dtype=x.dtype, device=x.device)",
                    ),
                    (
                        """
              TOP_K=top_k,
              BLOCK_M=BLOCK_M,
              """,
                        """
              TOP_K=top_k,
              BLOCK_M=block_m,
              """,
                    ),
                    (
                        """
              inter,
              BLOCK_M=BLOCK_M,
              """,
                        """
              inter,
              BLOCK_M=block_m,
              """,
                    ),
                ],
            ),
        ),
        I(
            "per_token_loop",
            T,
            "sample_loop",
            "each token's experts run on that token alone, summed in slot order",
            _torch_moe(
                "MoE in PyTorch, token by token.",
                """
              def kernel(x, router_logits, w_gate_up, w_down, top_k):
                  weights, ids = _route(router_logits, top_k)
                  y = torch.empty_like(x)
                  for t in range(x.shape[0]):
                      acc = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
                      for s in range(top_k):
                          acc += weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, int(ids[t, s]))[0]
                      y[t] = acc.to(x.dtype)
                  return y
              """,
            ),
        ),
        I(
            "load_order_slot_combine",
            T,
            "unreached_batch_value",
            "experts are scheduled busiest first, but outputs land in per-slot buffers summed in slot order",
            _torch_moe(
                "MoE in PyTorch; busiest experts first, combine in slot order.",
                """
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
              """,
            ),
        ),
    ]
