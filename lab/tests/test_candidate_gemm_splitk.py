"""lab/candidates/gemm_splitk.py under Triton's interpreter: both schedules against the fp32
product, a row of the partials schedule bitwise inside the one-pass schedule, the split from the
layer alone, and unsplit layers bitwise the bundled kernel (CPU)."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import pytest
import torch

from nodice.gate.runtime import prepare
from tests.conftest import ROOT
from tests.fp32_bounds import assert_within, matmul_bound

CPU = torch.device("cpu")
CANDIDATE = ROOT / "lab" / "candidates" / "gemm_splitk.py"
DTYPES = [torch.float32, torch.float16]
# Rows of the partials schedule (64-row tiles), and of the one-pass schedule (over 64: 128 x 128).
SMALL_M, LARGE_M = 3, 70


@pytest.fixture(scope="module")
def candidate() -> ModuleType:
    prepare(CPU)  # the interpreter, with the gate's deterministic tl.dot
    spec = importlib.util.spec_from_file_location("gemm_splitk", CANDIDATE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _operands(m: int, k: int, n: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn((m, k), generator=gen).to(dtype)
    b = (torch.randn((k, n), generator=gen) / k**0.5).to(dtype)
    return a, b


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


# (K, N): the gate's CPU layer (4 slices of 128), and one whose last slice is shorter than a K
# block and whose columns end inside a tile (7 slices of 64, the last 32 wide).
SPLIT_LAYERS = [(512, 256), (416, 200)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("k", "n"), SPLIT_LAYERS)
def test_both_schedules_match_the_fp32_product(
    candidate: ModuleType, dtype: torch.dtype, k: int, n: int
) -> None:
    assert candidate.split_count(k, n) > 1
    a, b = _operands(LARGE_M, k, n, dtype, seed=k + n)
    want = a.float() @ b.float()
    for rows in (a[:SMALL_M], a):
        got = candidate.kernel(rows.contiguous(), b)
        assert got.dtype == dtype and got.shape == (rows.shape[0], n)
        if dtype == torch.float32:  # torch's fp32 product sums in its BLAS's order: up to reassociation
            assert_within(got, want[: rows.shape[0]], matmul_bound(rows, b), f"{rows.shape[0]} rows")
        else:  # the fp16/bf16 output's own rounding dominates
            torch.testing.assert_close(got.float(), want[: rows.shape[0]], atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("use_tma", [1, 0])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("k", "n"), SPLIT_LAYERS)
def test_a_row_of_the_partials_schedule_is_bitwise_a_row_of_the_one_pass(
    candidate: ModuleType, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, k: int, n: int, use_tma: int
) -> None:
    monkeypatch.setattr(candidate, "USE_TMA", use_tma)
    a, b = _operands(LARGE_M, k, n, dtype, seed=7)
    inside = candidate.kernel(a, b)  # one-pass: 70 rows > PARTIALS_MAX_M
    for row in (0, LARGE_M // 2, LARGE_M - 1):
        alone = candidate.kernel(a[row : row + 1].clone(), b)  # partials, M = 1
        assert torch.equal(_bits(alone[0]), _bits(inside[row])), f"row {row}"


def test_the_split_comes_from_the_layer_alone(candidate: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from nodice.tasks import get_task

    # The workloads' layers: the two down projections split, every other layer runs unsplit.
    layers = {(w.params["K"], w.params["N"]) for w in get_task("gemm").workloads()}
    splits = {layer: candidate.split_count(*layer) for layer in layers}
    assert splits.pop((14336, 4096)) == 7 and splits.pop((25600, 5120)) == 10
    assert set(splits.values()) == {1}
    # Both schedules get the same slices for every M.
    seen: list[tuple[int, int, int]] = []

    def spy(name: str) -> Any:
        run = getattr(candidate, name)

        def record(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, slice_len: int, slices: int) -> None:
            seen.append((a.shape[0], slice_len, slices))
            run(a, b, c, slice_len, slices)

        return record

    monkeypatch.setattr(candidate, "_run_partials", spy("_run_partials"))
    monkeypatch.setattr(candidate, "_run_one_pass", spy("_run_one_pass"))
    a, b = _operands(LARGE_M, 512, 256, torch.float32, seed=3)
    for m in (1, 64, 65, LARGE_M):
        candidate.kernel(a[:m].contiguous(), b)
    assert [m for m, _, _ in seen] == [1, 64, 65, LARGE_M]
    assert {(length, slices) for _, length, slices in seen} == {(128, 4)}


@pytest.mark.parametrize("dtype", DTYPES)
def test_unsplit_layers_are_the_bundled_kernel_bit_for_bit(candidate: ModuleType, dtype: torch.dtype) -> None:
    from nodice.kernels.gemm import kernel as bundled

    k, n = 256, 256  # K < 2N: one slice
    assert candidate.split_count(k, n) == 1
    a, b = _operands(LARGE_M, k, n, dtype, seed=11)
    for m in (1, LARGE_M):
        rows = a[:m].contiguous()
        assert torch.equal(_bits(candidate.kernel(rows, b)), _bits(bundled(rows, b))), f"M = {m}"
