"""Held-out candidates: flows and harmless uses written after the static analyzer was measured on the pool.

They use patterns the main pool does not (partial application, globals set by a helper, negative axis
indices, predicate tables, getattr by name, exception paths, dispatch dicts), so that their static-only
rates say how the analyzer does on code it was not developed against.
"""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

import add_rmsnorm
import gemm
import rmsnorm
from _common import Candidate, invariant, module, violating

SPLIT = "heldout"


def _rms(doc: str, *parts: str, imports: str = "") -> str:
    return module(doc, rmsnorm.ROW_KERNEL, *parts, imports=imports)


INT64_ROW_KERNEL = rmsnorm.ROW_KERNEL.replace(
    "def _rmsnorm_row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):\n    row = tl.program_id(0)",
    "def _rmsnorm_row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr, WIDE: tl.constexpr):\n"
    "    row = tl.program_id(0)\n"
    "    if WIDE:\n"
    "        row = row.to(tl.int64)",
)


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    out = [
        V(
            "heldout_split_halving_loop",
            "rmsnorm",
            "work_partitioning",
            "while_loop",
            "split count halved in a while loop until rows x splits fits 12 programs",
            module(
                "Split-row RMSNorm sized to twelve programs.",
                rmsnorm.SPLIT_KERNELS,
                """
              def kernel(x, weight, eps):
                  rows = x.shape[0]
                  splits = 8
                  while splits > 1 and rows * splits > 12:
                      splits //= 2
                  return _split_rmsnorm(x, weight, eps, splits)
              """,
            ),
        ),
        V(
            "heldout_tile_partial",
            "rmsnorm",
            "reduction_order",
            "functools_partial",
            "the reduction tile is bound into a functools.partial of the launch",
            _rms(
                "RMSNorm launched through a prepared partial.",
                """
              def kernel(x, weight, eps):
                  batch, hidden = x.shape
                  y = torch.empty_like(x)
                  launch = functools.partial(_rmsnorm_row[(batch,)], BLOCK_H=256 if batch < 6 else 1024)
                  launch(x, weight, y, hidden, eps)
                  return y
              """,
                imports="import functools",
            ),
        ),
        V(
            "heldout_tile_global_config",
            "rmsnorm",
            "reduction_order",
            "global_statement",
            "a configure() helper sets a module-level tile from the row count",
            _rms(
                "RMSNorm with a module-level launch configuration.",
                """
              _TILE = 1024


              def _configure(rows):
                  global _TILE
                  _TILE = 512 if rows <= 4 else 1024


              def kernel(x, weight, eps):
                  batch, hidden = x.shape
                  _configure(batch)
                  y = torch.empty_like(x)
                  _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=_TILE)
                  return y
              """,
            ),
        ),
        V(
            "heldout_tile_negative_axis",
            "rmsnorm",
            "reduction_order",
            "negative_index",
            "token count read as x.shape[-2]",
            _rms(
                "RMSNorm over the token axis, tile by token count.",
                """
              def kernel(x, weight, eps):
                  tokens, hidden = x.shape[-2], x.shape[-1]
                  y = torch.empty_like(x)
                  block = 256 if tokens < 5 else 1024
                  _rmsnorm_row[(tokens,)](x, weight, y, hidden, eps, BLOCK_H=block)
                  return y
              """,
            ),
        ),
        V(
            "heldout_dispatch_dict",
            "rmsnorm",
            "algorithm_selection",
            "dict_dispatch",
            "a dict keyed by a batch-size test picks the PyTorch or the Triton implementation",
            _rms(
                "RMSNorm with two implementations behind a dispatch table.",
                rmsnorm.TORCH_PATH,
                """
              def _triton_rmsnorm(x, weight, eps):
                  batch, hidden = x.shape
                  y = torch.empty_like(x)
                  _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=256)
                  return y


              _IMPLS = {True: _rmsnorm_torch, False: _triton_rmsnorm}


              def kernel(x, weight, eps):
                  return _IMPLS[x.shape[0] <= 3](x, weight, eps)
              """,
            ),
        ),
        V(
            "heldout_split_predicate_table",
            "add_rmsnorm",
            "work_partitioning",
            "lambda_table",
            "split count from the first matching (predicate, splits) entry of a table of lambdas",
            module(
                "Fused add + RMSNorm with a split policy table.",
                add_rmsnorm.SPLIT_KERNELS,
                """
              _POLICY = [(lambda rows: rows <= 2, 4), (lambda rows: rows <= 5, 2), (lambda rows: True, 1)]


              def kernel(x, residual, weight, eps):
                  splits = next(s for ok, s in _POLICY if ok(x.shape[0]))
                  return _split_add_rmsnorm(x, residual, weight, eps, splits)
              """,
            ),
        ),
        V(
            "heldout_block_k_getattr",
            "gemm",
            "reduction_order",
            "getattr_by_name",
            "the K tile is read with getattr from a name built from the M bucket",
            module(
                "Tiled GEMM with named tile presets.",
                gemm.TILE_KERNEL,
                gemm.TILE_LAUNCH,
                """
              _PRESETS = types.SimpleNamespace(bk_small=32, bk_large=128)


              def kernel(a, b):
                  m, n = a.shape[0], b.shape[1]
                  c = torch.empty((m, n), dtype=a.dtype, device=a.device)
                  bucket = "small" if m <= 4 else "large"
                  return _launch_tile(a, b, c, 16, 128, getattr(_PRESETS, f"bk_{bucket}"))
              """,
                imports="import types",
            ),
        ),
        V(
            "heldout_split_k_exception",
            "gemm",
            "work_partitioning",
            "exception_path",
            "split-K chosen in an except branch of a size check",
            module(
                "Split-K GEMM that falls back to splitting when M is small.",
                gemm.SPLITK,
                """
              class _TooSkinny(Exception):
                  pass


              def _check(m):
                  if m < 4:
                      raise _TooSkinny(m)


              def kernel(a, b):
                  try:
                      _check(a.shape[0])
                      split_k = 1
                  except _TooSkinny:
                      split_k = 2
                  return _split_k_gemm(a, b, split_k)
              """,
            ),
        ),
        I(
            "heldout_int64_offsets_flag",
            "rmsnorm",
            "unreached_batch_value",
            "a constexpr switches row offsets to int64 when batch x hidden could overflow int32",
            module(
                "RMSNorm with 64-bit row offsets for huge inputs.",
                INT64_ROW_KERNEL,
                """
              def kernel(x, weight, eps):
                  batch, hidden = x.shape
                  y = torch.empty_like(x)
                  wide = batch * hidden >= 2**31
                  _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=1024, WIDE=wide)
                  return y
              """,
            ),
        ),
        I(
            "heldout_warn_large_batch",
            "rmsnorm",
            "unreached_batch_value",
            "the batch size only feeds a warning and an assert",
            _rms(
                "RMSNorm that warns about unusually large batches.",
                """
              def kernel(x, weight, eps):
                  batch, hidden = x.shape
                  assert batch >= 0
                  if batch > 65536:
                      warnings.warn(f"rmsnorm called with {batch} rows", stacklevel=2)
                  y = torch.empty_like(x)
                  _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=1024)
                  return y
              """,
                imports="import warnings",
            ),
        ),
        I(
            "heldout_rows_per_program_table",
            "rmsnorm",
            "row_tile",
            "rows per program looked up in a table by batch size; the reduced axis keeps its tile",
            module(
                "Multi-row RMSNorm with tuned rows per program.",
                rmsnorm.MULTIROW_KERNEL,
                """
              _ROWS = {1: 1, 2: 2, 3: 2, 4: 4}


              def kernel(x, weight, eps):
                  batch, hidden = x.shape
                  y = torch.empty_like(x)
                  block_m = _ROWS.get(batch, 8)
                  _rmsnorm_rows[(triton.cdiv(batch, block_m),)](x, weight, y, batch, hidden, eps, BLOCK_M=block_m, BLOCK_H=256)
                  return y
              """,
            ),
        ),
        I(
            "heldout_persistent_programs_from_batch",
            "rmsnorm",
            "grid_stride",
            "persistent programs = batch // 2 (1 to 4), each striding over rows",
            module(
                "Persistent RMSNorm with half as many programs as rows.",
                rmsnorm.PERSISTENT_KERNEL,
                """
              def kernel(x, weight, eps):
                  batch, hidden = x.shape
                  y = torch.empty_like(x)
                  programs = max(1, min(batch // 2, 4))
                  _rmsnorm_persistent[(programs,)](x, weight, y, batch, hidden, eps, BLOCK_H=512)
                  return y
              """,
            ),
        ),
        I(
            "heldout_contiguous_if_large",
            "add_rmsnorm",
            "unreached_batch_value",
            "large batches are made contiguous first (a copy that changes no value)",
            module(
                "Fused add + RMSNorm; large batches are copied to contiguous memory first.",
                add_rmsnorm.ROW_KERNEL,
                """
              def kernel(x, residual, weight, eps):
                  batch, hidden = x.shape
                  if batch > 8:
                      x, residual = x.contiguous(), residual.contiguous()
                  y = torch.empty_like(x)
                  residual_out = torch.empty_like(x)
                  _add_rmsnorm_row[(batch,)](x, residual, weight, y, residual_out, hidden, eps, BLOCK_H=1024)
                  return y, residual_out
              """,
            ),
        ),
        I(
            "heldout_chunk_rows_same_tiles",
            "gemm",
            "sample_loop",
            "M is processed in chunks whose size follows M; every chunk uses the same tiles",
            module(
                "Tiled GEMM over row chunks.",
                gemm.TILE_KERNEL,
                gemm.TILE_LAUNCH,
                """
              def kernel(a, b):
                  m, n = a.shape[0], b.shape[1]
                  c = torch.empty((m, n), dtype=a.dtype, device=a.device)
                  chunk = 32 if m > 64 else max(m, 1)
                  for lo in range(0, m, chunk):
                      _launch_tile(a[lo : lo + chunk], b, c[lo : lo + chunk], 16, 128, 64)
                  return c
              """,
            ),
        ),
    ]
    for c in out:
        c.split = SPLIT
    return out
