"""bench/gpu/profile_rows.py reads Nsight Compute's CSV details page: checked on the logs ncu wrote on
the H200 (bench/results/h200_2026-12-04/callO/prof), which this machine cannot produce."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROF = ROOT / "bench" / "results" / "h200_2026-12-04" / "callO" / "prof"


def _module():
    spec = importlib.util.spec_from_file_location("profile_rows", ROOT / "bench" / "gpu" / "profile_rows.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["profile_rows"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_one_kernel_with_its_launch_and_throughput_metrics() -> None:
    pr = _module()
    (k,) = pr.parse_ncu_csv((PROF / "gemm__qwen3-32b-down-decode-1__nodice.csv").read_text())
    assert k["kernel"] == "_matmul"
    assert (k["grid"], k["block"], k["registers"], k["dynamic_smem"]) == (80.0, 128.0, 71.0, 131072.0)
    assert k["block_limit_smem"] == 1.0 and k["waves_per_sm"] == 0.61
    assert k["dram_pct"] == 60.34 and k["achieved_occupancy_pct"] == 6.25
    assert abs(pr.duration_us(k) - 91.2) < 0.1  # ncu printed nanoseconds


def test_a_library_call_of_two_kernels_keeps_launch_order() -> None:
    pr = _module()
    ks = pr.parse_ncu_csv((PROF / "gemm__qwen3-32b-down-decode-1__cuBLAS.csv").read_text())
    assert [k["id"] for k in ks] == [0, 1]
    assert ks[0]["kernel"].startswith("nvjet_sm90") and "splitKreduce" in ks[1]["kernel"]
    assert ks[0]["grid"] == 132.0 and ks[0]["dram_pct"] == 89.07


def test_summary_names_cases_and_reports_an_empty_profile(tmp_path: Path) -> None:
    pr = _module()
    for name in ("gemm__qwen3-32b-down-decode-1__nodice.csv", "gdn__qwen3-next-qk-heads-prefill-8k__fla.csv"):
        shutil.copy(PROF / name, tmp_path / name)
    out = tmp_path / "profiles.json"
    assert pr.main(["--summarize", str(tmp_path), "--json", str(out)]) == 0
    cases = {c["case"]: c for c in json.loads(out.read_text())}
    gemm = cases["gemm__qwen3-32b-down-decode-1__nodice"]
    assert (gemm["task"], gemm["workload"], gemm["impl"]) == ("gemm", "qwen3-32b-down-decode-1", "nodice")
    assert abs(gemm["total_us"] - 91.2) < 0.1
    fla = cases["gdn__qwen3-next-qk-heads-prefill-8k__fla"]  # the baseline did not finish in time there
    assert fla["kernels"] == [] and fla["total_us"] is None and "no kernel profiled" in fla["error"]


def test_text_without_a_csv_header_has_no_kernels() -> None:
    pr = _module()
    assert pr.parse_ncu_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n") == []
