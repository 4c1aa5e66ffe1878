"""Flows around helpers and exception handlers: a host-side arithmetic helper is not an algorithm, a
helper that launches or calls a library op is; an ``except`` branch taken for batch-dependent
reasons is a batch-dependent branch, whatever raised."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "nodice" / "kernels" / "gemm.py").read_text()
SPLIT_K_GEMM = (ROOT / "nodice" / "examples" / "gemm" / "split_k_from_m.py").read_text()

# The bundled GEMM inlines the wave arithmetic of its tile chooser; these are the helper spellings.
INLINE_WAVES = GEMM[GEMM.index("    wide = (\n") : GEMM.index("    # Waves × tile area")]
NESTED_WAVES = """\
    def waves(bm, bn):
        return triton.cdiv(triton.cdiv(m, bm) * triton.cdiv(n, bn), sms)

    wide = waves(WIDE_BLOCK_M, WIDE_BLOCK_N) * WIDE_BLOCK_M * WIDE_BLOCK_N
    narrow = waves(NARROW_BLOCK_M, NARROW_BLOCK_N) * NARROW_BLOCK_M * NARROW_BLOCK_N
"""
MODULE_WAVES = """\
    wide = _waves(m, n, sms, WIDE_BLOCK_M, WIDE_BLOCK_N) * WIDE_BLOCK_M * WIDE_BLOCK_N
    narrow = _area(_waves(m, n, sms, NARROW_BLOCK_M, NARROW_BLOCK_N), NARROW_BLOCK_M, NARROW_BLOCK_N)
"""
MODULE_HELPERS = '''

def _waves(m, n, sms, bm, bn):
    """How many rounds of ``sms`` programs the ``bm × bn`` tiles of an ``m × n`` output take."""
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    return max(1, triton.cdiv(tiles, sms))


def _area(waves, bm, bn):
    return waves * bm * bn
'''


def write(tmp_path: Path, text: str, name: str = "cand.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def gemm_with(waves: str, helpers: str = "", kernel_prefix: str = "") -> str:
    """The bundled GEMM with its tile chooser's wave arithmetic spelled as ``waves``."""
    assert INLINE_WAVES.startswith("    wide = (") and INLINE_WAVES in GEMM
    text = GEMM.replace(INLINE_WAVES, waves)
    text = text.replace("\n\ndef _tile(", helpers + "\n\ndef _tile(", 1)
    if kernel_prefix:
        anchor = "    if m == 0:\n        return c\n"
        assert anchor in text
        text = text.replace(anchor, anchor + textwrap.indent(textwrap.dedent(kernel_prefix), "    "), 1)
    return text


def rules(path: Path, task: str = "gemm") -> tuple[set[str], set[str]]:
    violations, unresolved = run_static(path, get_task(task))
    return {f.rule for f in violations}, {f.rule for f in unresolved}


@pytest.mark.parametrize(
    ("waves", "helpers"),
    [(INLINE_WAVES, ""), (NESTED_WAVES, ""), (MODULE_WAVES, MODULE_HELPERS)],
    ids=["inline", "nested_helper", "module_helpers"],
)
def test_tile_chooser_with_arithmetic_helpers_passes(tmp_path: Path, waves: str, helpers: str) -> None:
    violations, unresolved = rules(write(tmp_path, gemm_with(waves, helpers)))
    assert violations == set()
    # num_warps follows the batch in a tl.dot-only kernel: left to the dynamic stage, as inline.
    assert unresolved == {"launch_option_unknown_order"}


def test_arithmetic_helper_in_a_sibling_module_passes(tmp_path: Path) -> None:
    write(tmp_path, "import triton\n" + MODULE_HELPERS, "tiles.py")
    text = gemm_with(MODULE_WAVES).replace(
        "import torch\n", "import torch\nfrom tiles import _area, _waves\n", 1
    )
    violations, _ = rules(write(tmp_path, text))
    assert violations == set()


GEMV = """

@triton.jit
def _gemv(a_ptr, b_ptr, c_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + row * K + k + ks, mask=k + ks < K, other=0.0).to(tl.float32)
        b_mask = (k + ks[:, None] < K) & (cols[None, :] < N)
        b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=b_mask, other=0.0).to(tl.float32)
        acc += tl.sum(a[:, None] * b, axis=0)
    tl.store(c_ptr + row * N + cols, acc.to(c_ptr.dtype.element_ty), mask=cols < N)


def _launch_gemv(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    _gemv[(m, triton.cdiv(n, 64))](a, b, c, n, k, BLOCK_N=64, BLOCK_K=128)
    return c


def _small_m(a, b, c):
    # Looks like bookkeeping, but launches through another helper.
    rows = triton.cdiv(a.shape[0], 1)
    return _launch_gemv(a, b, c) if rows else c


def _small_m_torch(a, b, c):
    return c.copy_(torch.matmul(a.float(), b.float()))


def _outer_products(a, b, c):
    # Only operators and benign tensor methods, but on tensors: not host arithmetic.
    prods = a.float()[:, :, None] * b.float()[None, :, :]
    return c.copy_(prods[:, 0, :].to(c.dtype))
"""


@pytest.mark.parametrize(
    "prefix",
    [
        "if m <= 4:\n    return _launch_gemv(a, b, c)\n",
        "if m <= 4:\n    return _small_m(a, b, c)\n",
        "if m <= 4:\n    return _small_m_torch(a, b, c)\n",
        "if m >= 4096:\n    a = _outer_products(a, b, c)\n",
    ],
    ids=["helper_launches", "helper_launches_through_helper", "helper_calls_library", "helper_on_tensors"],
)
def test_helper_that_computes_under_a_batch_branch_is_still_an_algorithm(tmp_path: Path, prefix: str) -> None:
    text = gemm_with(NESTED_WAVES, GEMV, kernel_prefix=prefix)
    violations, _ = rules(write(tmp_path, text))
    assert "algorithm_selection_by_batch" in violations


def test_arithmetic_helper_after_a_launching_early_return_is_still_a_choice(tmp_path: Path) -> None:
    """The pure helper on one side does not hide the launch on the other."""
    text = gemm_with(
        NESTED_WAVES,
        GEMV + MODULE_HELPERS,
        kernel_prefix="""\
        if m <= 4:
            _gemv[(m, triton.cdiv(n, 64))](a, b, c, n, k, BLOCK_N=64, BLOCK_K=128)
            return c
        """,
    )
    violations, _ = rules(write(tmp_path, text))
    assert "algorithm_selection_by_batch" in violations
