"""A runtime chunk count from the batch: ``for c in range(0, n_chunks)`` over pieces of ``H // n_chunks``.

The chunk loop masks its elements against the loop index (the last chunk's tail), which used to
excuse its end bound as it excuses a causal key loop's: but here the bound also sizes every piece,
so the batch decides how the row's sum is cut.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from nodice.gate.static import run_static
from nodice.tasks import get_task

CHUNKED = """
import torch
import triton
import triton.language as tl

NUM_SMS = 16


@triton.jit
def _rmsnorm_chunks(x_ptr, w_ptr, y_ptr, hidden, eps, n_chunks, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.cdiv(hidden, n_chunks)
    cols = tl.arange(0, BLOCK_H)
    total = 0.0
    for c in range(0, n_chunks):
        part = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, chunk, BLOCK_H):
            offs = c * chunk + start + cols
            m = (start + cols < chunk) & (offs < hidden)
            x = tl.load(x_ptr + row * hidden + offs, mask=m, other=0.0).to(tl.float32)
            part += x * x
        total += tl.sum(part, axis=0)
    rstd = 1.0 / tl.sqrt(total / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        offs = start + cols
        m = offs < hidden
        x = tl.load(x_ptr + row * hidden + offs, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    n_chunks = {chunks}
    y = torch.empty_like(x)
    _rmsnorm_chunks[(batch,)](x, weight, y, hidden, eps, n_chunks, BLOCK_H=64)
    return y
"""


def _findings(tmp_path: Path, chunks: str):
    path = tmp_path / "cand.py"
    path.write_text(textwrap.dedent(CHUNKED.replace("{chunks}", chunks)))
    return run_static(path, get_task("rmsnorm"))


def test_a_chunk_count_from_the_batch_bounding_a_runtime_loop_is_found(tmp_path: Path) -> None:
    violations, _ = _findings(tmp_path, "max(1, NUM_SMS // batch)")
    assert [(f.rule, f.mechanism, f.protected) for f in violations] == [
        ("reduction_range_from_batch", "work_partitioning", "n_chunks")
    ]
    assert "for c in range(0, n_chunks)" in violations[0].path[-1]


def test_a_chunk_count_from_the_hidden_size_passes(tmp_path: Path) -> None:
    assert _findings(tmp_path, "max(1, hidden // 256)") == ([], [])


def test_the_batch_in_the_grid_only_passes(tmp_path: Path) -> None:
    assert _findings(tmp_path, "4") == ([], [])


def test_a_masked_loop_whose_pieces_do_not_follow_its_end_still_passes(tmp_path: Path) -> None:
    """A key loop ending at a batch-dependent bound, each step a fixed tile masked against the index:
    iterations past the real end are no-ops, as before."""
    code = """
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def _row(x_ptr, y_ptr, hidden, limit, eps, BLOCK_H: tl.constexpr):
            row = tl.program_id(0)
            cols = tl.arange(0, BLOCK_H)
            acc = tl.zeros([BLOCK_H], dtype=tl.float32)
            for start in range(0, limit, BLOCK_H):
                offs = start + cols
                m = offs < hidden
                x = tl.load(x_ptr + row * hidden + offs, mask=m, other=0.0)
                acc += x * x
            rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
            x = tl.load(x_ptr + row * hidden + cols, mask=cols < hidden, other=0.0)
            tl.store(y_ptr + row * hidden + cols, x * rstd, mask=cols < hidden)


        def kernel(x, weight, eps):
            batch, hidden = x.shape
            y = torch.empty_like(x)
            _row[(batch,)](x, y, hidden, hidden * max(1, 8 // batch), eps, BLOCK_H=1024)
            return y
        """
    path = tmp_path / "cand.py"
    path.write_text(textwrap.dedent(code))
    assert run_static(path, get_task("rmsnorm")) == ([], [])
