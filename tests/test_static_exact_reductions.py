"""Splits of exact reductions: a split count from the batch that only cuts maxima, argmaxes, integer
counts or bitwise ors cannot change a bit, so the static stage leaves it to dynamic validation
(``exact_reduction_from_batch``, unresolved); the same split of a float sum stays a violation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import nodice
from nodice.gate.static import run_static
from nodice.tasks import get_task

# RMSNorm scaled by the row's largest magnitude (no overflow in x²), the magnitude found by
# split-hidden programs, as many per row as the SMs left: partial maxima combined afterwards.
SPLIT = """
import torch
import triton
import triton.language as tl

NUM_SMS = 16


@triton.jit
def _partial(x_ptr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    lo = split * chunk
    for start in range(lo, lo + chunk, BLOCK_H):
        mask = (start + offs < hidden) & (start + offs < lo + chunk)
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc = {update}
    tl.store(part_ptr + row * num_splits + split, {fold}(acc, axis=0))


@triton.jit
def _normalize(
    x_ptr, w_ptr, part_ptr, y_ptr, hidden, eps, num_splits, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr
):
    row = tl.program_id(0)
    s_offs = tl.arange(0, BLOCK_S)
    parts = tl.load(part_ptr + row * num_splits + s_offs, mask=s_offs < num_splits, other=0.0)
    scale = {combine}
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32) / scale
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden * scale * scale + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    num_splits = max(1, min(8, NUM_SMS // batch))
    chunk = triton.cdiv(hidden, num_splits)
    y = torch.empty_like(x)
    partials = torch.empty((batch, num_splits), dtype=torch.float32, device=x.device)
    _partial[(batch, num_splits)](x, partials, hidden, chunk, num_splits, BLOCK_H=256)
    block_h = min(triton.next_power_of_2(hidden), 1024)
    block_s = triton.next_power_of_2(num_splits)
    _normalize[(batch,)](x, weight, partials, y, hidden, eps, num_splits, BLOCK_H=block_h, BLOCK_S=block_s)
    return y
"""
MAXIMA = {
    "update": "tl.maximum(acc, tl.abs(x))",
    "fold": "tl.max",
    "combine": "tl.maximum(tl.max(parts, axis=0), 1e-30)",
}
# The same split of a float sum: the row's sum of squares in batch-dependent pieces.
SUMS = {
    "update": "acc + x * x",
    "fold": "tl.sum",
    "combine": "tl.sqrt(tl.maximum(tl.sum(parts, axis=0) / hidden, 1e-30))",
}


def _write(tmp_path: Path, code: str, **parts: str) -> Path:
    for k, v in parts.items():
        code = code.replace("{" + k + "}", v)
    path = tmp_path / "cand.py"
    path.write_text(textwrap.dedent(code))
    return path


def _rules(path: Path, task: str = "rmsnorm") -> tuple[list[str], list[str]]:
    violations, unresolved = run_static(path, get_task(task))
    return [f.rule for f in violations], [f.rule for f in unresolved]


def test_a_split_of_maxima_is_left_to_the_dynamic_stage(tmp_path: Path) -> None:
    path = _write(tmp_path, SPLIT, **MAXIMA)
    violations, unresolved = run_static(path, get_task("rmsnorm"))
    assert violations == []
    assert {f.rule for f in unresolved} == {"exact_reduction_from_batch"}
    assert {f.protected for f in unresolved} == {"NUM_SPLITS"}
    assert all(f.mechanism == "work_partitioning" for f in unresolved)
    # Both launches: the split kernel and the one that combines the partial maxima.
    lines = path.read_text().splitlines()
    launches = [i for i, text in enumerate(lines, 1) if "_partial[" in text or "_normalize[" in text]
    assert sorted(f.line for f in unresolved) == launches


def test_the_same_split_of_a_float_sum_is_a_violation(tmp_path: Path) -> None:
    violations, unresolved = _rules(_write(tmp_path, SPLIT, **SUMS))
    assert violations and "exact_reduction_from_batch" not in violations + unresolved


def test_a_split_that_also_cuts_a_float_sum_is_a_violation(tmp_path: Path) -> None:
    """One split count, two partials per piece: the maximum is exact, the sum of squares is not."""
    code = SPLIT.replace(
        "    acc = tl.zeros([BLOCK_H], dtype=tl.float32)\n    lo = split * chunk",
        "    acc = tl.zeros([BLOCK_H], dtype=tl.float32)\n    sq = tl.zeros([BLOCK_H], dtype=tl.float32)\n"
        "    lo = split * chunk",
    ).replace("        acc = {update}", "        acc = {update}\n        sq += x * x")
    violations, _ = _rules(_write(tmp_path, code, **MAXIMA))
    assert violations


def test_the_exact_split_passes_the_whole_gate_and_the_float_one_is_rejected(tmp_path: Path) -> None:
    exact = nodice.check(_write(tmp_path, SPLIT, **MAXIMA), "rmsnorm", device="cpu", seed=3)
    assert exact.verdict == "pass", exact.reason
    assert exact.stage("static").verdict == "unresolved"  # type: ignore[union-attr]
    assert exact.stage("dynamic").verdict == "pass"  # type: ignore[union-attr]
    floats = nodice.check(_write(tmp_path, SPLIT, **SUMS), "rmsnorm", device="cpu", seed=3)
    assert floats.verdict == "bi_violation"
    assert floats.reason.startswith("static:")


# Greedy tokens by a split-vocabulary argmax: each piece's first maximum, then the first piece that
# holds the row's maximum (ties resolved to the lowest index across pieces too).
ARGMAX = """
import torch
import triton
import triton.language as tl

NUM_SMS = 16


@triton.jit
def _piece_argmax(logits_ptr, val_ptr, idx_ptr, vocab, piece, num_splits, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    cols0 = tl.arange(0, BLOCK_V)
    best = tl.full([BLOCK_V], float("-inf"), tl.float32)
    best_idx = tl.full([BLOCK_V], 2**31 - 1, tl.int32)
    for start in range(split * piece, (split + 1) * piece, BLOCK_V):
        cols = start + cols0
        ok = (cols < vocab) & (cols < (split + 1) * piece)
        x = tl.load(logits_ptr + row * vocab + cols, mask=ok, other=float("-inf"))
        better = x > best
        best_idx = tl.where(better, cols, best_idx)
        best = tl.maximum(best, x)
    top = tl.max(best, axis=0)
    tl.store(val_ptr + row * num_splits + split, top)
    tl.store(idx_ptr + row * num_splits + split, tl.min(tl.where(best == top, best_idx, 2**31 - 1), axis=0))


@triton.jit
def _combine(val_ptr, idx_ptr, out_ptr, num_splits, BLOCK_S: tl.constexpr):
    row = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    vals = tl.load(val_ptr + row * num_splits + s, mask=s < num_splits, other=float("-inf"))
    idxs = tl.load(idx_ptr + row * num_splits + s, mask=s < num_splits, other=2**31 - 1)
    top = tl.max(vals, axis=0)
    tl.store(out_ptr + row, tl.min(tl.where(vals == top, idxs, 2**31 - 1), axis=0).to(tl.int64))


def kernel(logits, temperature, top_k, top_p, seed):
    n_rows, vocab = logits.shape
    num_splits = max(1, NUM_SMS // n_rows)
    piece = triton.cdiv(vocab, num_splits)
    vals = torch.empty((n_rows, num_splits), dtype=torch.float32, device=logits.device)
    idxs = torch.empty((n_rows, num_splits), dtype=torch.int32, device=logits.device)
    tokens = torch.empty(n_rows, dtype=torch.int64, device=logits.device)
    _piece_argmax[(n_rows, num_splits)](logits, vals, idxs, vocab, piece, num_splits, BLOCK_V=256)
    _combine[(n_rows,)](vals, idxs, tokens, num_splits, BLOCK_S=triton.next_power_of_2(num_splits))
    return tokens
"""


def test_a_split_vocabulary_argmax_is_left_to_the_dynamic_stage(tmp_path: Path) -> None:
    assert _rules(_write(tmp_path, ARGMAX), "sampling") == ([], ["exact_reduction_from_batch"] * 2)


# The same split with Triton's own reductions: each piece's maximum and its ``tl.argmax`` made a
# position in the row by index arithmetic (``split * piece + at``), the pieces combined on the host.
TL_ARGMAX = """
import torch
import triton
import triton.language as tl

NUM_SMS = 16


@triton.jit
def _piece(logits_ptr, val_ptr, idx_ptr, vocab, piece, num_splits, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    cols = split * piece + tl.arange(0, BLOCK_V)
    ok = (cols < vocab) & (cols < (split + 1) * piece)
    x = tl.load(logits_ptr + row * vocab + cols, mask=ok, other=float("-inf"))
    tl.store(val_ptr + row * num_splits + split, {fold})
    tl.store(idx_ptr + row * num_splits + split, split * piece + tl.argmax(x, axis=0))


def kernel(logits, temperature, top_k, top_p, seed):
    n_rows, vocab = logits.shape
    num_splits = max(1, min(8, NUM_SMS // n_rows))
    piece = triton.cdiv(vocab, num_splits)
    vals = torch.empty((n_rows, num_splits), dtype=torch.float32, device=logits.device)
    idxs = torch.empty((n_rows, num_splits), dtype=torch.int64, device=logits.device)
    block = triton.next_power_of_2(piece)
    _piece[(n_rows, num_splits)](logits, vals, idxs, vocab, piece, num_splits, BLOCK_V=block)
    return torch.gather(idxs, 1, torch.argmax(vals, dim=1, keepdim=True))[:, 0]
"""


def test_an_argmax_made_a_position_by_index_arithmetic_is_left_to_the_dynamic_stage(tmp_path: Path) -> None:
    """``tl.argmax`` is an integer; ``split * piece + at`` is index arithmetic, an integer stored
    (not a float value the split computes)."""
    violations, unresolved = _rules(_write(tmp_path, TL_ARGMAX, fold="tl.max(x, axis=0)"), "sampling")
    assert violations == [] and set(unresolved) == {"exact_reduction_from_batch"}
    # The same pieces' float sums (a split softmax's denominators) stay a violation.
    violations, _ = _rules(_write(tmp_path, TL_ARGMAX, fold="tl.sum(tl.exp(x), axis=0)"), "sampling")
    assert "reduction_tile_from_batch" in violations


# Per-row counts of entries above a threshold and a row's "any non-finite" flag, each accumulated
# over split pieces in integers and combined on the host: integer sums and ors are exact.
COUNTS = """
import torch
import triton
import triton.language as tl

NUM_SMS = 16


@triton.jit
def _count(x_ptr, thr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype={acc_dtype})
    lo = split * chunk
    for start in range(lo, lo + chunk, BLOCK_H):
        mask = (start + offs < hidden) & (start + offs < lo + chunk)
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0)
        acc {update}
    tl.store(part_ptr + row * num_splits + split, {fold})


def kernel(x, weight, eps):
    batch, hidden = x.shape
    num_splits = max(1, NUM_SMS // batch)
    chunk = triton.cdiv(hidden, num_splits)
    partials = torch.zeros((batch, num_splits), dtype=torch.int32, device=x.device)
    _count[(batch, num_splits)](x, 1.0, partials, hidden, chunk, num_splits, BLOCK_H=256)
    counts = partials.sum(dim=1)
    return x * (counts > 0)[:, None] * weight
"""


@pytest.mark.parametrize(
    ("update", "fold"),
    [
        ("+= (x > thr).to(tl.int32)", "tl.sum(acc, axis=0)"),
        ("|= (x != x).to(tl.int32)", "tl.max(acc, axis=0)"),
        ("= acc | (tl.abs(x) == float('inf')).to(tl.int32)", "tl.max(acc, axis=0)"),
    ],
    ids=["int32_count", "or_flag", "or_flag_assign"],
)
def test_integer_counts_and_bitwise_flags_are_exact(tmp_path: Path, update: str, fold: str) -> None:
    path = _write(tmp_path, COUNTS, acc_dtype="tl.int32", update=update, fold=fold)
    assert _rules(path) == ([], ["exact_reduction_from_batch"])


def test_a_float_count_split_the_same_way_is_a_violation(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        COUNTS,
        acc_dtype="tl.float32",
        update="+= (x > thr).to(tl.float32)",
        fold="tl.sum(acc, axis=0)",
    )
    violations, unresolved = _rules(path)
    assert violations and not unresolved


# A reduction tile from the batch: harmless for a maximum, a violation for a sum.
TILE = """
import torch
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
        acc = {update}
    scale = {fold}(acc, axis=0)
    for start in range(0, hidden, BLOCK_H):
        m = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=m, other=0.0)
        tl.store(y_ptr + row * hidden + start + offs, x / scale, mask=m)


def kernel(x, weight, eps):
    y = torch.empty_like(x)
    block_h = 256 if x.shape[0] < 16 else 1024
    _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=block_h)
    return y
"""


def test_a_batch_dependent_tile_of_a_maximum_is_left_to_the_dynamic_stage(tmp_path: Path) -> None:
    path = _write(tmp_path, TILE, update="tl.maximum(acc, tl.abs(x))", fold="tl.max")
    assert _rules(path) == ([], ["exact_reduction_from_batch"])
    path = _write(tmp_path, TILE, update="acc + x * x", fold="tl.sum")
    assert _rules(path) == (["reduction_tile_from_batch"], [])


# Pure torch: the row cut into batch-dependent pieces, each piece reduced, the results combined.
TORCH = """
import torch


def kernel(x, weight, eps):
    batch, hidden = x.shape
    pieces = max(1, 16 // batch)
    xf = x.float()
    parts = xf.abs().chunk(pieces, dim=-1)
    scale = torch.stack([{piece} for p in parts]).{combine}(dim=0).clamp_min(1e-30)
    return (xf / scale[:, None] * weight.float()).to(x.dtype)
"""


@pytest.mark.parametrize(
    ("piece", "combine", "exact"),
    [
        ("p.amax(dim=-1)", "amax", True),
        ("(p > 1).sum(dim=-1, dtype=torch.int64)", "sum", True),
        ("p.pow(2).sum(dim=-1)", "sum", False),
    ],
    ids=["amax", "int64_count", "float_sum"],
)
def test_torch_pieces_reduced_exactly_or_not(tmp_path: Path, piece: str, combine: str, exact: bool) -> None:
    violations, unresolved = _rules(_write(tmp_path, TORCH, piece=piece, combine=combine))
    if exact:
        assert (violations, unresolved) == ([], ["exact_reduction_from_batch"])
    else:
        assert violations == ["batch_value_in_kernel_output"] and unresolved == []
