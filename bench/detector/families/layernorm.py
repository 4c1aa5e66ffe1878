"""LayerNorm candidates: one Triton row kernel (mean, then squared deviations) under several launch policies."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, invariant, module, violating

T = "layernorm"

ROW_KERNEL = """
@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    base = x_ptr + row * hidden
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        acc += tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / hidden
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
"""

PERSISTENT_KERNEL = """
@triton.jit
def _layernorm_persistent(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, hidden, eps, BLOCK_H: tl.constexpr):
    # Rows pid, pid + programs, ...: the grid is capped, the work per row is not.
    offs = tl.arange(0, BLOCK_H)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        base = x_ptr + row * hidden
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            mask = start + offs < hidden
            acc += tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / hidden
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            mask = start + offs < hidden
            x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
        for start in range(0, hidden, BLOCK_H):
            mask = start + offs < hidden
            x = tl.load(base + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row * hidden + start + offs, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
"""

ONE_PASS_TORCH = """
def _layernorm_torch(x, weight, bias, eps):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = xf.pow(2).mean(-1, keepdim=True) - mean * mean
    return ((xf - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)
"""


def _row(doc: str, launcher: str, *extra: str) -> str:
    return module(doc, ROW_KERNEL, *extra, launcher)


def candidates() -> list[Candidate]:
    V, I = violating, invariant  # noqa: E741
    return [
        V(
            "tile_shrinks_with_batch",
            T,
            "reduction_order",
            "direct",
            "reduction tile = 1024 >> log2(batch) (more rows resident)",
            _row(
                "LayerNorm with a narrower tile for bigger batches, to keep more rows in flight.",
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    block = max(64, 1024 >> max(0, (batch - 1).bit_length() - 2))
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(block, triton.next_power_of_2(hidden)))
                    return y
                """,
            ),
        ),
        V(
            "warps_from_batch",
            T,
            "reduction_order",
            "launch_option",
            "num_warps = 8 for batches under 64 rows, else 4 (the tl.sum tree follows the warps)",
            _row(
                "LayerNorm with more warps per row while the batch leaves SMs idle.",
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    warps = 8 if batch < 64 else 4
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(triton.next_power_of_2(hidden), 1024), num_warps=warps)
                    return y
                """,
            ),
            observable_on=("cuda",),
        ),
        V(
            "one_pass_torch_for_few_rows",
            T,
            "algorithm_selection",
            "branch",
            "B <= 2 -> eager torch with E[x²] − E[x]² (one pass); else the two-pass kernel",
            _row(
                "LayerNorm that skips the launch for one or two rows.",
                ONE_PASS_TORCH,
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    if batch <= 2:
                        return _layernorm_torch(x, weight, bias, eps)
                    y = torch.empty_like(x)
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(triton.next_power_of_2(hidden), 1024))
                    return y
                """,
            ),
        ),
        V(
            "tile_from_total_elements",
            T,
            "reduction_order",
            "numel",
            "tile = 256 when x.numel() < 16384, else 1024",
            _row(
                "LayerNorm that picks its tile from the size of the whole input.",
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    block = 256 if x.numel() < 16384 else 1024
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(block, triton.next_power_of_2(hidden)))
                    return y
                """,
            ),
        ),
        I(
            "row_per_program",
            T,
            "batch_in_grid",
            "One program per row, the tile from the hidden size alone.",
            _row(
                "LayerNorm, one program per row.",
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(triton.next_power_of_2(hidden), 1024))
                    return y
                """,
            ),
        ),
        I(
            "persistent_grid_capped",
            T,
            "grid_cap",
            "A persistent grid of min(batch, 132) programs walking rows with the same per-row loop.",
            module(
                "LayerNorm on a persistent grid capped by the SM count.",
                PERSISTENT_KERNEL,
                """
                SM_COUNT = 132

                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    grid = (max(1, min(batch, SM_COUNT)),)
                    _layernorm_persistent[grid](x, weight, bias, y, batch, hidden, eps, BLOCK_H=min(triton.next_power_of_2(hidden), 1024))
                    return y
                """,
            ),
        ),
        I(
            "stages_from_batch",
            T,
            "launch_option_harmless",
            "num_stages from the batch (pipelining only; the reduction is the same)",
            _row(
                "LayerNorm that pipelines deeper for big batches.",
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(triton.next_power_of_2(hidden), 1024), num_stages=3 if batch > 256 else 2)
                    return y
                """,
            ),
        ),
        I(
            "empty_batch_exit",
            T,
            "empty_batch",
            "An early return for an empty batch, then the row kernel.",
            _row(
                "LayerNorm with an early exit for no rows.",
                """
                def kernel(x, weight, bias, eps):
                    batch, hidden = x.shape
                    y = torch.empty_like(x)
                    if batch == 0:
                        return y
                    _layernorm_row[(batch,)](x, weight, bias, y, hidden, eps, BLOCK_H=min(triton.next_power_of_2(hidden), 1024))
                    return y
                """,
            ),
        ),
    ]
