"""Flows around helpers and exception handlers: a host-side arithmetic helper is not an algorithm, a
helper that launches or calls a library op is; an ``except`` branch taken for batch-dependent
reasons is a batch-dependent branch, whatever raised."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.branches import confirmable
from nodice.gate.static import run_static
from nodice.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "nodice" / "kernels" / "gemm.py").read_text()

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


class TileError(ValueError):
    pass


def _area(waves, bm, bn):
    if waves <= 0:
        raise TileError(f"no tiles: {waves}")
    return waves * bm * bn
'''


POINTER_PIN_ON = "\nSINGLE_POINTER_LOADS = 1\n"


def write(tmp_path: Path, text: str, name: str = "cand.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def gemm_with(waves: str, helpers: str = "", kernel_prefix: str = "") -> str:
    """The bundled GEMM with its tile chooser's wave arithmetic spelled as ``waves``."""
    assert INLINE_WAVES.startswith("    wide = (") and INLINE_WAVES in GEMM
    # The pointer-load pin's M <= 16 branch is its own finding (tested below); these tests are about
    # the tile chooser, so they read the GEMM with the pin off.
    assert GEMM.count(POINTER_PIN_ON) == 1
    text = GEMM.replace(INLINE_WAVES, waves).replace(POINTER_PIN_ON, "\nSINGLE_POINTER_LOADS = 0\n", 1)
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


def test_the_shipped_pointer_load_pin_is_one_choice_left_for_the_dynamic_stage() -> None:
    # With the pin on, M <= 16 takes pointer loads instead of TMA descriptors: two launches the
    # static stage cannot prove equal, so it reports that one branch, and the dynamic stage runs both
    # sides (nodice.gate.branches) -- the gate's pass on CUDA rests on that, not on the static stage.
    violations, _ = run_static(ROOT / "nodice" / "kernels" / "gemm.py", get_task("gemm"))
    assert [f.rule for f in violations] == ["algorithm_selection_by_batch"]
    (finding,) = violations
    assert "_pointer_loads" in GEMM.splitlines()[finding.line - 1]
    assert confirmable(finding)


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


# ---- exception handlers -------------------------------------------------------------------------
# The split-K GEMM of the detector pool (kernels and ``_split_k_gemm(a, b, split_k, block_m=16)``),
# with its own ``kernel`` replaced.
SPLIT_K_POOL = (ROOT / "bench" / "detector" / "pool" / "gemm" / "heldout_split_k_exception.py").read_text()
SPLIT_K_HEAD = SPLIT_K_POOL[: SPLIT_K_POOL.index("class _TooSkinny")]

HANDLER_VIOLATIONS = {
    # The body's value survives a handler that assigns another one.
    "split_from_table_with_default": """
        _SPLITS = {1: 8, 2: 8, 4: 4, 8: 2}

        def kernel(a, b):
            try:
                parts = _SPLITS[a.shape[0]]
            except KeyError:
                parts = 1
            return _split_k_gemm(a, b, parts)
        """,
    # A lookup keyed by the batch misses for some row counts: the handler runs for those.
    "split_when_lookup_misses": """
        _BLOCK_M = {16: 16, 32: 32, 64: 64}

        def kernel(a, b):
            m = a.shape[0]
            try:
                block_m = _BLOCK_M[m]
                split_k = 1
            except KeyError:  # row counts off the table: split the reduction instead
                block_m, split_k = 16, 4
            return _split_k_gemm(a, b, split_k, block_m=block_m)
        """,
    "split_when_lookup_misses_in_a_helper": """
        _PLANS = {16: (16, 1), 64: (64, 1)}  # row tile, split count

        def _plan(m):
            return _PLANS[m]

        def kernel(a, b):
            try:
                plan = _plan(a.shape[0])
            except KeyError:
                plan = (16, 2)
            return _split_k_gemm(a, b, plan[1], block_m=plan[0])
        """,
    "split_when_no_bucket_fits": """
        _BUCKETS = (16, 64, 256)

        def kernel(a, b):
            m = a.shape[0]
            try:
                block_m = next(bucket for bucket in _BUCKETS if m <= bucket)
                split_k = 1
            except StopIteration:
                block_m, split_k = 64, 4
            return _split_k_gemm(a, b, split_k, block_m=block_m)
        """,
    # A small-batch fallback that launches with another split count, in the handler itself.
    "fallback_launch_in_the_handler": """
        def _unsplit(a, b):
            if a.shape[0] < 16:
                raise ValueError("too few rows for one split")
            return _split_k_gemm(a, b, 1)

        def kernel(a, b):
            try:
                return _unsplit(a, b)
            except ValueError:
                m, k = a.shape
                n = b.shape[1]
                c = torch.empty((m, n), dtype=a.dtype, device=a.device)
                partials = torch.empty((4, m, n), dtype=torch.float32, device=a.device)
                k_per_split = triton.cdiv(triton.cdiv(k, 4), 64) * 64
                grid = (triton.cdiv(m, 16), triton.cdiv(n, 128), 4)
                _gemm_partial[grid](a, b, partials, m, n, k, k_per_split, a.stride(0), b.stride(0),
                                    BLOCK_M=16, BLOCK_N=128, BLOCK_K=64)
                _sum_splits[(triton.cdiv(m * n, 1024),)](partials, c, m * n, SPLIT_K=4, BLOCK=1024)
                return c
        """,
    # The same through a helper: the handler path computes what the tried path does not.
    "fallback_helper_in_the_handler": """
        def _whole_tiles(a, b):
            if a.shape[0] % 16:
                raise ValueError("the unsplit path wants whole 16-row tiles")
            return _split_k_gemm(a, b, 1)

        def _four_splits(a, b):
            return _split_k_gemm(a, b, 4)

        def kernel(a, b):
            try:
                return _whole_tiles(a, b)
            except ValueError:
                return _four_splits(a, b)
        """,
}


@pytest.mark.parametrize("name", sorted(HANDLER_VIOLATIONS))
def test_choice_made_by_a_batch_dependent_exception_is_caught(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, SPLIT_K_HEAD + textwrap.dedent(HANDLER_VIOLATIONS[name]))
    violations, _ = run_static(path, get_task("gemm"))
    assert violations, name
    assert {f.mechanism for f in violations} & {"work_partitioning", "algorithm_selection"}


HANDLER_PASSES = {
    # The SM count is no batch quantity, whichever way it is found.
    "device_properties_or_default": """
        def kernel(a, b):
            try:
                sms = torch.cuda.get_device_properties(a.device).multi_processor_count
            except (AssertionError, RuntimeError):
                sms = 132
            split_k = 2 if triton.cdiv(b.shape[0], 64) >= sms else 1
            return _split_k_gemm(a, b, split_k)
        """,
    # A table keyed by the reduction length: which side runs does not depend on the batch.
    "split_from_k_table": """
        _SPLITS = {4096: 2, 8192: 4}

        def kernel(a, b):
            try:
                split_k = _SPLITS[a.shape[1]]
            except KeyError:
                split_k = 1
            return _split_k_gemm(a, b, split_k)
        """,
    # A batch-keyed table that only picks the row tile: tiles of non-reduction axes are free.
    "row_tile_from_batch_table": """
        _BLOCK_M = {1: 16, 2: 16, 4: 16}

        def kernel(a, b):
            try:
                block_m = _BLOCK_M[a.shape[0]]
            except KeyError:
                block_m = 64
            return _split_k_gemm(a, b, 2, block_m=block_m)
        """,
    # A launch that fails for resource reasons (constexprs only) falls back to the same reduction.
    "launch_failure_fallback_same_reduction": """
        def kernel(a, b):
            try:
                return _split_k_gemm(a, b, 2, block_n=256)
            except Exception:
                return _split_k_gemm(a, b, 2, block_n=128)
        """,
    # A batch-dependent raise whose handler only reports it.
    "raise_then_reraise_with_context": """
        def kernel(a, b):
            try:
                if a.shape[0] > 1 << 20:
                    raise ValueError("too many rows")
            except ValueError as e:
                raise RuntimeError(f"gemm: {e}") from e
            return _split_k_gemm(a, b, 2)
        """,
}


@pytest.mark.parametrize("name", sorted(HANDLER_PASSES))
def test_handler_not_chosen_by_the_batch_passes(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, SPLIT_K_HEAD + textwrap.dedent(HANDLER_PASSES[name]))
    violations, _ = run_static(path, get_task("gemm"))
    assert violations == [], [f.message for f in violations]


def test_pool_candidate_with_a_raise_in_a_callee_is_still_caught() -> None:
    violations, _ = run_static(
        ROOT / "bench/detector/pool/gemm/heldout_split_k_exception.py", get_task("gemm")
    )
    assert {f.rule for f in violations} & {"split_count_from_batch", "protected_param_from_batch"}
