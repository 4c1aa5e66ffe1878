"""`nodice audit` on installed callables and on files."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import EXAMPLES, run_cli


def test_audit_library_callables_and_a_file() -> None:
    proc = run_cli(
        "audit",
        "torch.mm",
        "torch.nn.functional.rms_norm",
        str(EXAMPLES / "rmsnorm" / "torch_path_small_batch.py"),
        "--device",
        "cpu",
        "--json",
    )
    rows = {r["target"]: r for r in json.loads(proc.stdout)}
    # OpenBLAS sgemm changes its blocking with M: a row of `a` is not invariant on CPU.
    assert rows["torch.mm"]["verdict"] == "bi_violation"
    assert rows["torch.mm"]["task"] == "gemm" and rows["torch.mm"]["mechanism"].startswith("dynamic")
    assert rows["torch.nn.functional.rms_norm"]["verdict"] == "pass"
    file_row = rows[str(EXAMPLES / "rmsnorm" / "torch_path_small_batch.py")]
    assert file_row["task"] == "rmsnorm" and file_row["verdict"] == "bi_violation"
    assert proc.returncode == 1


def test_audit_unknown_callable_is_an_error_row() -> None:
    proc = run_cli("audit", "torch.no_such_function_xyz", "--task", "rmsnorm", "--device", "cpu", "--json")
    assert proc.returncode == 2
    (row,) = json.loads(proc.stdout)
    assert row["verdict"] == "error" and "torch.no_such_function_xyz" in row["detail"]
    assert "Traceback" not in proc.stderr


def test_audit_benchmark_baselines_by_name() -> None:
    proc = run_cli(
        "audit",
        "--baseline",
        "torch F.rms_norm",
        "--baseline",
        "cuDNN SDPA",
        "--device",
        "cpu",
        "--json",
    )
    rows = {r["target"]: r for r in json.loads(proc.stdout)}
    assert rows["torch F.rms_norm"]["task"] == "rmsnorm" and rows["torch F.rms_norm"]["verdict"] == "pass"
    # A GPU-only baseline on CPU is an input that cannot be judged, with the reason.
    assert rows["cuDNN SDPA"]["verdict"] == "error" and "runs on cuda" in rows["cuDNN SDPA"]["detail"]
    assert proc.returncode == 2


def test_audit_on_a_missing_cuda_device_is_one_line() -> None:
    """A device the machine lacks is refused once, before any target is audited."""
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    proc = run_cli("audit", "torch.mm", "torch.nn.functional.rms_norm", "--device", "cuda", "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "device unavailable: cuda requested but no CUDA device is visible"
    ]
