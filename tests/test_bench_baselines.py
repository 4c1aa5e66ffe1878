"""Library baselines: they compute their task, setup stays untimed, missing ones say why; BI audits."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nodice.gate.correctness import compare, has_own_correctness
from nodice.measuring.baselines import (
    BaselineUnavailable,
    Prepared,
    audit_baseline,
    baselines_for,
    find_baseline,
    load_baselines,
    provider_versions,
)
from nodice.measuring.baselines.attention_decode import split_pages
from nodice.measuring.baselines.attention_prefill import put_cutlass_dsl_on_path, to_sequence_major
from nodice.measuring.baselines.cublaslt import HeuristicResult, column_major_operands, library_path
from nodice.measuring.baselines.gdn import pack_varlen
from nodice.measuring.baselines.paged_kv import flashinfer_page_indices, gather_pages, key_mask, pages_used
from nodice.measuring.baselines.sampling import effective_top_k, scaled_logits
from nodice.tasks import CATALOG, get_task
from nodice.tasks.base import Task

CPU = torch.device("cpu")
CUDA = torch.device("cuda")


def _cases(device: torch.device) -> list[tuple[str, str]]:
    return [(t, b.name) for t in CATALOG for b in baselines_for(t, device)]


def _impl(task_name: str, name: str, device: torch.device) -> Any:
    loaded, missing = load_baselines(task_name, device)
    if name not in loaded:
        pytest.skip(f"{name}: {missing[name]}")
    return loaded[name]


def _check(task: Task, impl: Any, args: tuple[Any, ...], device: torch.device) -> None:
    dtype = task.dtype_for(device)
    if has_own_correctness(task):
        report = task.check_correctness(lambda a: impl(*a), device, dtype, seed=3)
        assert report is not None and report.ok, report
        return
    ok, detail, _ = compare(task, impl(*args), task.reference(*args), dtype)
    assert ok, detail


@pytest.mark.parametrize(("task_name", "name"), _cases(CPU))
def test_cpu_baseline_computes_the_task(task_name: str, name: str) -> None:
    task = get_task(task_name)
    impl = _impl(task_name, name, CPU)
    for w in task.small_workloads():
        args = task.workload_inputs(w, torch.Generator().manual_seed(1), CPU, task.dtype_for(CPU))
        _check(task, impl, args, CPU)


@pytest.mark.parametrize(("task_name", "name"), _cases(CPU))
def test_prepared_closure_returns_what_the_plain_call_does(task_name: str, name: str) -> None:
    task = get_task(task_name)
    impl = _impl(task_name, name, CPU)
    args = task.workload_inputs(
        task.small_workloads()[0], torch.Generator().manual_seed(2), CPU, torch.float32
    )
    prepare = getattr(impl, "prepare", None)
    if prepare is None:
        pytest.skip("no per-batch setup")
    closure = prepare(*args)
    plain = impl(*args)
    timed = closure()
    plain, timed = (o if isinstance(o, tuple) else (o,) for o in (plain, timed))
    assert all(torch.equal(a, b) for a, b in zip(plain, timed, strict=True))


def test_every_task_has_a_baseline_on_each_device() -> None:
    for t in CATALOG:
        assert baselines_for(t, CUDA), t
        if t not in ("gdn", "kda"):  # fla's kernels are GPU-only; these tasks have no CPU library
            assert baselines_for(t, CPU), t


def test_gpu_only_baselines_are_not_listed_on_cpu() -> None:
    cpu_names = {b.name for t in CATALOG for b in baselines_for(t, CPU)}
    for t in CATALOG:
        for b in baselines_for(t, CUDA):
            assert (b.name in cpu_names) == ("cpu" in b.devices), b.name
    gpu_only = {"cuDNN SDPA", "flash SDPA", "Liger RMSNorm", "FlashInfer decode (fixed split)"}
    assert gpu_only.isdisjoint(cpu_names)
    assert not baselines_for("gdn", CPU) and not baselines_for("kda", CPU)
    with pytest.raises(BaselineUnavailable, match="runs on cuda, not cpu"):
        find_baseline("cuDNN SDPA", CPU)


def test_missing_optional_providers_are_reported_with_their_package() -> None:
    seen = 0
    for t in CATALOG:
        listed = baselines_for(t, CUDA)
        loaded, missing = load_baselines(t, CUDA)
        # Listing never drops one: each loaded or has a reason.
        assert set(loaded) | set(missing) == {b.name for b in listed}
        for b in listed:
            if provider_versions([b])[b.provider] == "missing":
                seen += 1
                assert b.name in missing, b.name
                assert b.provider in missing[b.name] and "not installed" in missing[b.name]
                with pytest.raises(BaselineUnavailable, match=b.provider):
                    b.load()
    if seen == 0:
        pytest.skip("every optional provider is installed here")


def test_provider_versions() -> None:
    every = [b for t in CATALOG for b in baselines_for(t, CUDA)]
    versions = provider_versions(every)
    assert versions["torch"] == torch.__version__
    assert {"liger-kernel", "flashinfer-python", "fla-core", "flash-attn-4", "sgemm-bi"} <= set(versions)


def test_every_baseline_says_its_configuration() -> None:
    for t in CATALOG:
        for b in baselines_for(t, CUDA) + baselines_for(t, CPU):
            assert b.note and b.provider and b.devices, b.name


# ---- BI audit ---------------------------------------------------------------------------------------


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def test_audit_passes_batch_invariant_baselines() -> None:
    loaded, _ = load_baselines("rmsnorm", CPU)
    result = audit_baseline("rmsnorm", loaded["torch F.rms_norm"], CPU, seed=0)
    assert result.verdict == "pass", result.detail
    assert result.dtypes == ("float32",) and "contexts on cpu" in result.detail
    loaded, _ = load_baselines("attention_prefill", CPU)
    assert audit_baseline(get_task("attention_prefill"), loaded["torch SDPA"], CPU, seed=0).verdict == "pass"


def test_audit_flags_a_batch_dependent_callable() -> None:
    def eps_from_batch(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return _rms_norm(x, weight, eps * x.shape[0])

    result = audit_baseline("rmsnorm", eps_from_batch, CPU, seed=0)
    assert result.verdict == "bi_violation"
    assert result.context.startswith("batch=") and result.context.endswith("(float32)")
    assert "differs in context" in result.detail


def test_audit_skips_a_probe_dtype_the_library_rejects() -> None:
    def fp32_only(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"{x.dtype} is not supported")
        return _rms_norm(x, weight, eps)

    result = audit_baseline("rmsnorm", fp32_only, CPU, seed=0, dtypes=[torch.float32, torch.float16])
    assert result.verdict == "pass" and result.dtypes == ("float32",)
    assert "skipped float16 not accepted: TypeError: torch.float16 is not supported" in result.detail


def test_audit_skips_dtypes_a_library_declares_it_lacks_without_calling_it() -> None:
    seen: list[torch.dtype] = []

    def prepare(x: torch.Tensor, weight: torch.Tensor, eps: float) -> Callable[[], torch.Tensor]:
        seen.append(x.dtype)
        return lambda: _rms_norm(x, weight, eps)

    impl = Prepared(prepare, "fp32 library", dtypes=(torch.float32,))
    result = audit_baseline("rmsnorm", impl, CPU, seed=0, dtypes=[torch.float32, torch.float16])
    assert (
        result.verdict == "pass" and "float16 not accepted: the library takes float32 only" in result.detail
    )
    assert set(seen) == {torch.float32}


def test_audit_of_a_library_that_fails_in_the_task_dtype_is_an_error() -> None:
    def broken(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        raise RuntimeError("no kernel image for this device")

    result = audit_baseline("rmsnorm", broken, CPU, seed=0)
    assert result.verdict == "error" and "no kernel image" in result.detail and result.dtypes == ()


# ---- adapters' index and layout conversions ------------------------------------------------------------


def test_flashinfer_page_indices_from_block_table() -> None:
    table = torch.tensor([[5, 2, 9, 0], [7, 1, 3, 3], [4, 8, 8, 8]], dtype=torch.int32)
    seq_lens = torch.tensor([33, 16, 1], dtype=torch.int32)
    pages = flashinfer_page_indices(table, seq_lens, page_size=16)
    assert pages.indptr.tolist() == [0, 3, 4, 5]
    assert pages.indices.tolist() == [5, 2, 9, 7, 4]
    assert pages.last_page_len.tolist() == [1, 16, 1]
    assert {pages.indptr.dtype, pages.indices.dtype, pages.last_page_len.dtype} == {torch.int32}
    assert pages_used(seq_lens, 16).tolist() == [3, 1, 1]


def test_flashinfer_page_indices_reject_a_narrow_table() -> None:
    with pytest.raises(ValueError, match="more pages"):
        flashinfer_page_indices(torch.zeros((1, 2), dtype=torch.int32), torch.tensor([33]), page_size=16)


def test_gathered_pages_hold_each_request_in_order() -> None:
    pool, page = 6, 4
    # Every slot holds its own global token index: slot (p, t) = p·page + t.
    cache = torch.arange(pool * page, dtype=torch.float32).view(pool, page, 1, 1)
    table = torch.tensor([[3, 0, 5], [2, 4, 1]], dtype=torch.int32)
    seq_lens = torch.tensor([6, 9], dtype=torch.int32)
    got = gather_pages(cache, table, max_len=9)[..., 0, 0]
    assert got.shape == (2, 9)
    assert got[0, :6].tolist() == [12, 13, 14, 15, 0, 1]
    assert got[1].tolist() == [8, 9, 10, 11, 16, 17, 18, 19, 4]
    assert key_mask(seq_lens, 9).sum(dim=1).tolist() == [6, 9]


def test_flashinfer_split_and_flash_attn_layout() -> None:
    assert split_pages(16) == 128 and split_pages(1) == 2048 and split_pages(4096) == 1
    q = torch.randn(2, 4, 5, 8)
    (qs,) = to_sequence_major(q)
    assert qs.shape == (2, 5, 4, 8) and qs.is_contiguous() and torch.equal(qs.transpose(1, 2), q)


def test_cutlass_dsl_packages_join_sys_path_as_its_pth_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The layout nvidia-cutlass-dsl installs: the `cutlass` package lives under dsl_packages/.
    (tmp_path / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass").mkdir(parents=True)
    (tmp_path / "nvidia_cutlass_dsl" / "__init__.py").write_text("")
    (tmp_path / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass" / "__init__.py").write_text("")
    # Only the fake layout is visible (a real nvidia-cutlass-dsl, whose own .pth ran, may be installed).
    monkeypatch.setattr(sys, "path", [str(tmp_path), *(p for p in sys.path if "-packages" not in p)])
    for name in ("cutlass", "nvidia_cutlass_dsl"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.invalidate_caches()
    assert importlib.util.find_spec("cutlass") is None
    put_cutlass_dsl_on_path()
    spec = importlib.util.find_spec("cutlass")
    assert spec is not None and spec.origin is not None and spec.origin.startswith(str(tmp_path))
    sys.modules.pop("nvidia_cutlass_dsl", None)


def _column_major(buffer: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    """The (rows, cols) matrix BLAS reads from ``buffer`` stored column-major with leading dimension ld."""
    return buffer[: cols * ld].reshape(cols, ld)[:, :rows].T


@pytest.mark.parametrize(("m", "k", "n"), [(1, 8, 4), (5, 3, 7), (16, 64, 32)])
def test_cublaslt_operands_compute_the_row_major_product(m: int, k: int, n: int) -> None:
    # What cuBLASLt computes from the three layouts the baseline hands it (D = A·B, column-major),
    # read back as the row-major (M, N) result torch sees, is a @ b.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    (ar, ac, ald), (br, bc, bld), (cr, cc, cld) = column_major_operands(m, k, n)
    first, second = _column_major(b.ravel(), ar, ac, ald), _column_major(a.ravel(), br, bc, bld)
    assert (ac, cr, cc) == (br, ar, bc)  # the shapes chain: (N×K)·(K×M) = N×M
    c = np.empty(m * n)
    _column_major(c, cr, cc, cld)[...] = first @ second
    np.testing.assert_allclose(c.reshape(m, n), a @ b, rtol=1e-12, atol=1e-12)


def test_cublaslt_heuristic_result_has_the_headers_layout() -> None:
    # cublasLtMatmulHeuristicResult_t: 64 bytes of algorithm, size_t workspace, status, waves, 4 ints.
    assert ctypes.sizeof(HeuristicResult) == 96
    assert HeuristicResult.workspace_size.offset == 64 and HeuristicResult.waves_count.offset == 76


def test_cublaslt_library_is_found_among_the_mapped_files() -> None:
    maps = (
        "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n"
        "7f20-7f30 r-xp 00000000 08:01 13 /site/nvidia/cu13/lib/libcublasLt.so.13\n"
        "7f40-7f50 rw-p 00000000 00:00 0 \n"
    )
    assert library_path(maps) == "/site/nvidia/cu13/lib/libcublasLt.so.13"
    assert library_path("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libcublas.so.13\n") is None


def test_cublaslt_baseline_on_a_machine_without_cuda_says_why() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    _, missing = load_baselines("gemm", CUDA)
    assert missing["cuBLASLt, no split-K"] == "cuBLASLt needs a CUDA device"


def test_flashinfer_gdn_packing_gives_each_batch_row_its_own_sequence() -> None:
    b, t, h, d = 3, 5, 2, 4
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, t, h, d, generator=gen, dtype=torch.bfloat16) for _ in range(3))
    g = -torch.rand(b, t, h, generator=gen)
    beta = torch.rand(b, t, h, generator=gen)
    fq, fk, fv, alpha, gates, cu = pack_varlen(q, k, v, g, beta)
    assert cu.tolist() == [0, 5, 10, 15] and cu.dtype == torch.int64
    assert fq.shape == (b * t, h, d) and alpha.shape == gates.shape == (b * t, h)
    assert alpha.dtype == gates.dtype == torch.float32 and all(x.is_contiguous() for x in (fq, fk, fv))
    for i in range(b):
        rows = slice(int(cu[i]), int(cu[i + 1]))
        assert torch.equal(fq[rows], q[i]) and torch.equal(fk[rows], k[i]) and torch.equal(fv[rows], v[i])
        assert torch.equal(alpha[rows], torch.exp(g[i])) and torch.equal(gates[rows], beta[i])


def test_sampling_adapter_scales_and_maps_top_k() -> None:
    logits = torch.tensor([[1.0, 2.0], [4.0, -2.0]])
    temperature = torch.tensor([0.5, 0.0])
    assert scaled_logits(logits, temperature).tolist() == [[2.0, 4.0], [4.0, -2.0]]
    assert effective_top_k(torch.tensor([0, 3, 9], dtype=torch.int32), 5).tolist() == [5, 3, 5]


# ---- on a GPU: every CUDA baseline against the reference on the gate's own problem ------------------


@pytest.mark.gpu
@pytest.mark.parametrize(("task_name", "name"), _cases(CUDA))
def test_cuda_baseline_computes_the_task(task_name: str, name: str) -> None:
    task = get_task(task_name)
    impl = _impl(task_name, name, CUDA)
    gen = torch.Generator().manual_seed(4)
    problem = task.problem(gen, CUDA, task.dtype_for(CUDA))
    args = task.compose(problem, task.samples(problem, gen, 3), gen)
    _check(task, impl, args, CUDA)
    prepare = getattr(impl, "prepare", None)
    if prepare is not None and not has_own_correctness(task):
        assert torch.equal(prepare(*args)(), impl(*args))
