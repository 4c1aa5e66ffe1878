"""Sampling candidates: RNG seeds and offsets, built on the task's seed, plus a PyTorch sampler."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, module, violating

T = "sampling"

DRAW = "u = tl.rand(seed, tl.zeros([ROWS], dtype=tl.int32))"
SEED_LOAD = "seed = tl.load(seed_ptr + rows, mask=row_ok, other=0)"

TORCH_SAMPLER = '''
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
'''


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "philox_offset_from_row",
            T,
            "rng",
            "position_offset",
            "the Philox offset is the request's row in the batch",
            from_seed(
                T,
                "Top-k/top-p sampling; each row draws at its own Philox offset.",
                [(DRAW, "u = tl.rand(seed, rows)")],
            ),
        ),
        V(
            "batch_seed_plus_row",
            T,
            "rng",
            "batch_seed",
            "one seed for the whole batch (the first request's), advanced by the row index",
            from_seed(
                T,
                "Top-k/top-p sampling seeded once per batch.",
                [(SEED_LOAD, "seed = tl.load(seed_ptr) + rows.to(tl.int64)")],
            ),
        ),
        V(
            "offset_from_batch_size",
            T,
            "rng",
            "batch_size_offset",
            "the Philox offset advances by the number of rows in the launch",
            from_seed(
                T,
                "Top-k/top-p sampling; the RNG counter advances per launched row.",
                [(DRAW, "u = tl.rand(seed, tl.zeros([ROWS], dtype=tl.int32) + n_rows)")],
            ),
        ),
        V(
            "torch_generator_per_batch",
            T,
            "rng",
            "shared_generator",
            "a PyTorch sampler drawing every row's uniform from one generator seeded by the first request",
            module(
                "Top-k/top-p sampling in PyTorch with one generator per batch.",
                TORCH_SAMPLER,
                """
              def kernel(logits, temperature, top_k, top_p, seed):
                  order, cdf = _filtered_cdf(logits, temperature, top_k, top_p)
                  gen = torch.Generator(device="cpu").manual_seed(int(seed[0]))
                  u = torch.rand(logits.shape[0], generator=gen, dtype=torch.float64).to(logits.device)
                  pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=logits.shape[1] - 1)
                  drawn = order.gather(1, pick).squeeze(1)
                  return torch.where(temperature <= 0, logits.argmax(dim=1), drawn)
              """,
            ).replace("import triton\nimport triton.language as tl\n", ""),
        ),
        I(
            "seed_own_key",
            T,
            "batch_in_grid",
            "the seed: one uniform from the request's own seed at offset 0",
            from_seed(T, "Top-k/top-p sampling by bisection; the draw is keyed by the request's seed.", []),
        ),
        I(
            "rows_per_program_from_batch",
            T,
            "row_tile",
            "rows packed per program follow the batch size; rows never interact",
            from_seed(
                T,
                "Top-k/top-p sampling packing up to eight requests per program.",
                [
                    (
                        "rows = max(1, min(MAX_ROWS, TILE_ELEMENTS // triton.next_power_of_2(vocab)))",
                        "rows = max(1, min(8, triton.next_power_of_2(n_rows)))",
                    )
                ],
            ),
        ),
        I(
            "all_greedy_shortcut",
            T,
            "same_math_kernel_choice",
            "a batch of only greedy requests takes argmax directly (the kernel's greedy answer, too)",
            from_seed(
                T,
                "Top-k/top-p sampling with an all-greedy fast path.",
                [
                    (
                        "def kernel(logits, temperature, top_k, top_p, seed):",
                        """
              def kernel(logits, temperature, top_k, top_p, seed):
                  if bool((temperature <= 0).all()):
                      # First index of the largest logit, as the kernel's greedy rows do.
                      return logits.argmax(dim=1)
              """,
                    )
                ],
            ),
        ),
        I(
            "loop_over_requests",
            T,
            "sample_loop",
            "one launch per request",
            from_seed(
                T,
                "Top-k/top-p sampling launched request by request.",
                [
                    (
                        "def kernel(logits, temperature, top_k, top_p, seed):",
                        """
              def kernel(logits, temperature, top_k, top_p, seed):
                  return torch.cat(
                      [
                          _sample_rows(logits[i : i + 1], temperature[i : i + 1], top_k[i : i + 1], top_p[i : i + 1], seed[i : i + 1])
                          for i in range(logits.shape[0])
                      ]
                  )


              def _sample_rows(logits, temperature, top_k, top_p, seed):
              """,
                    )
                ],
            ),
        ),
    ]
