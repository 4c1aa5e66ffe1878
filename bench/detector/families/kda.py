"""Kimi-delta-attention candidates, built on the task's chunk-aligned recurrent seed."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, from_seed, invariant, violating

T = "kda"

PREDICT = "predicted = tl.sum(k[:, :, None] * state, axis=1)"
SIG = """
    LANES: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
"""
SIG_SPLIT = """
    LANES: tl.constexpr,
    BLOCK_V: tl.constexpr,
    DK_SPLIT: tl.constexpr,
):
"""
# Reduce over Dk in DK_SPLIT partial sums, then add those: a different association of the same sum.
PREDICT_SPLIT = """
prod = k[:, :, None] * state
if DK_SPLIT > 1:
    predicted = tl.sum(tl.sum(tl.reshape(prod, [LANES, DK_SPLIT, DK // DK_SPLIT, BLOCK_V]), axis=2), axis=1)
else:
    predicted = tl.sum(prod, axis=1)
"""
LAUNCH_TAIL = """
        BLOCK_V=block_v,
        num_warps=4,
    )
"""


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "chunk_from_lanes",
            T,
            "reduction_order",
            "direct",
            "the gate-sum chunk is 8 tokens while the launch has fewer than 8 lanes, 16 above",
            from_seed(
                T,
                "Kimi delta attention; launches with few lanes restart the gate sums more often.",
                [("CHUNK=CHUNK,", "CHUNK=8 if batch * n_heads < 8 else CHUNK,")],
            ),
        ),
        V(
            "dk_split_small_batch",
            T,
            "reduction_order",
            "direct",
            "for batches of one or two sequences the Dk reduction is done in four partial sums",
            from_seed(
                T,
                "Kimi delta attention; small batches split the key reduction into partial sums.",
                [
                    (SIG, SIG_SPLIT),
                    (PREDICT, PREDICT_SPLIT),
                    (
                        LAUNCH_TAIL,
                        """
                      BLOCK_V=block_v,
                      DK_SPLIT=4 if batch <= 2 else 1,
                      num_warps=4,
                  )
              """,
                    ),
                ],
            ),
        ),
        V(
            "torch_path_single_sequence",
            T,
            "algorithm_selection",
            "control_dependent",
            "a single sequence runs the recurrence eagerly in PyTorch",
            from_seed(
                T,
                "Kimi delta attention; a lone sequence is run eagerly.",
                [
                    (
                        "def kernel(q, k, v, g, beta, scale):",
                        """
              def _eager(q, k, v, g, beta, scale):
                  batch, seq_len, n_heads, dk = q.shape
                  o = torch.empty_like(v)
                  for b in range(batch):
                      for h in range(n_heads):
                          state = torch.zeros((dk, v.shape[-1]), dtype=torch.float32, device=q.device)
                          for t in range(seq_len):
                              kt, vt = k[b, t, h].float(), v[b, t, h].float()
                              state = state * torch.exp(g[b, t, h])[:, None]
                              u = beta[b, t, h] * (vt - kt @ state)
                              state = state + torch.outer(kt, u)
                              o[b, t, h] = (scale * (q[b, t, h].float() @ state)).to(o.dtype)
                  return o


              def kernel(q, k, v, g, beta, scale):
                  if q.shape[0] == 1:
                      return _eager(q, k, v, g, beta, scale)
              """,
                    )
                ],
            ),
        ),
        V(
            "num_warps_from_batch",
            T,
            "reduction_order",
            "launch_option",
            "warp count from the batch size (the in-block Dk reduction tree changes on GPU)",
            from_seed(
                T,
                "Kimi delta attention; more warps once the batch is large.",
                [
                    (
                        LAUNCH_TAIL,
                        """
                      BLOCK_V=block_v,
                      num_warps=2 if batch < 4 else 8,
                  )
              """,
                    )
                ],
            ),
            observable_on=("cuda",),
        ),
        I(
            "chunked_seed",
            T,
            "batch_in_grid",
            "the seed: chunks of 16 from each sequence's start, lanes and value blocks from the head dims",
            from_seed(
                T,
                "Kimi delta attention, token by token with chunk-local gate sums, lanes from the head dims.",
                [],
            ),
        ),
        I(
            "lanes_from_batch",
            T,
            "row_tile",
            "lanes per program follow the batch size; lanes never interact",
            from_seed(
                T,
                "Kimi delta attention packing more lanes per program for large batches.",
                [
                    (
                        "lanes = max(1, STATE_ELEMENTS // (dk * block_v))",
                        "lanes = 1 if batch < 4 else max(1, STATE_ELEMENTS // (dk * block_v))",
                    )
                ],
            ),
        ),
        I(
            "loop_over_sequences",
            T,
            "sample_loop",
            "one launch per sequence",
            from_seed(
                T,
                "Kimi delta attention launched sequence by sequence.",
                [
                    (
                        "def kernel(q, k, v, g, beta, scale):",
                        """
              def kernel(q, k, v, g, beta, scale):
                  return torch.cat(
                      [_kda(q[i : i + 1], k[i : i + 1], v[i : i + 1], g[i : i + 1], beta[i : i + 1], scale) for i in range(q.shape[0])]
                  )


              def _kda(q, k, v, g, beta, scale):
              """,
                    )
                ],
            ),
        ),
    ]
