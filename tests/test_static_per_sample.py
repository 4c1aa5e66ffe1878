"""A sample's own size computed from the whole batch: ``x.numel() // B`` is the hidden size.

The element count of a batch argument depends on the batch; divided by the batch size (or by the
batch size times sizes that do not depend on it) it does not. Anything else about the count stays
batch-dependent: a loop bound or grid computed from it still splits a reduction by the batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

CANDIDATE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_rows(x_ptr, w_ptr, y_ptr, row_len, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, row_len, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * row_len + cols, mask=cols < row_len, other=0.0).to(tl.float32)
        acc += v * v
    r = tl.rsqrt(tl.sum(acc, axis=0) / row_len + eps)
    for start in range(0, row_len, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < row_len
        v = tl.load(x_ptr + row * row_len + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * row_len + cols, (v * r * w).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, weight, eps):
    B = x.shape[0]
    row_len = {row_len}
    y = torch.empty_like(x)
    _rms_rows[(B,)](x, weight, y, row_len, eps, BLOCK=128)
    return y
"""

PER_SAMPLE = [
    "x.numel() // B",
    "x.numel() // x.shape[0]",
    "x.numel() // len(x)",
    "x.nelement() // x.size(0)",
    "x.numel() // (B * 1) // 1",
    "x.contiguous().numel() // B",
]
# Element counts that keep the batch: the loop bound grows with it.
BATCH_DEPENDENT = [
    "x.numel() // 4",
    "x.numel() // (B // 2 + 1)",
    "x[: B // 2 + 1].numel() // B",
]


def _write(tmp_path: Path, row_len: str) -> Path:
    path = tmp_path / "cand.py"
    path.write_text(CANDIDATE.replace("{row_len}", row_len))
    return path


@pytest.mark.parametrize("row_len", PER_SAMPLE)
def test_the_element_count_over_the_batch_size_is_a_samples_own(tmp_path: Path, row_len: str) -> None:
    assert run_static(_write(tmp_path, row_len), get_task("rmsnorm")) == ([], [])


@pytest.mark.parametrize("row_len", BATCH_DEPENDENT)
def test_an_element_count_that_keeps_the_batch_bounds_the_reduction(tmp_path: Path, row_len: str) -> None:
    violations, _ = run_static(_write(tmp_path, row_len), get_task("rmsnorm"))
    assert [f.rule for f in violations] == ["reduction_range_from_batch"], violations
