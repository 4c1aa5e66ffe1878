"""lab/scripts/profile_rows.py reads Nsight Compute's CSV details page: checked on the logs ncu wrote on
the H200 (lab/results/h200_2026-12-04/callO/prof), which this machine cannot produce."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROF = ROOT / "lab" / "results" / "h200_2026-12-04" / "callO" / "prof"


def _module():
    spec = importlib.util.spec_from_file_location(
        "profile_rows", ROOT / "lab" / "scripts" / "profile_rows.py"
    )
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


def _stand_in_ncu(tmp_path: Path) -> Path:
    """A stand-in for ncu (which needs a GPU): records its arguments and writes an empty CSV."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    ncu.write_text(
        "#!/usr/bin/env bash\n"
        '[ "$1" = --version ] && { echo "stand-in ncu"; exit 0; }\n'
        f'echo "$*" >> {tmp_path}/calls\n'
        'while [ "$#" -gt 0 ]; do [ "$1" = --log-file ] && : > "$2"; shift; done\n'
    )
    ncu.chmod(0o755)
    return bin_dir


def test_script_takes_seconds_per_case_and_sections(tmp_path: Path) -> None:
    import os
    import subprocess

    bin_dir = _stand_in_ncu(tmp_path)
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), PATH=f"{bin_dir}:{os.environ['PATH']}", BUDGET="100")
    env |= {"SECONDS_PER_CASE": "30", "SECTIONS": "SpeedOfLight MemoryWorkloadAnalysis"}
    env["NODICE_SITE"] = str(tmp_path / "site")
    cases = [
        "gemm:qwen3-32b-down-decode-1:nodice",  # 30 s by default
        "gdn:qwen3-next-prefill-8k:fla:90",  # 90 s asked, 100 - 0 left: runs
        "rmsnorm:llama3-8b-prefill:Liger:500",  # more than the budget: skipped
        "rmsnorm:llama3-8b-prefill:nodice:soon",  # not a number: skipped with its reason
    ]
    r = subprocess.run(
        ["bash", str(ROOT / "lab" / "scripts" / "profile_rows.sh"), *cases],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2
    assert "--section SpeedOfLight --section MemoryWorkloadAnalysis" in calls[0]
    assert "--section Occupancy" not in calls[0]
    assert "--task gemm --workload qwen3-32b-down-decode-1 --impl nodice" in calls[0]
    assert "--task gdn --workload qwen3-next-prefill-8k --impl fla" in calls[1]
    log = (out / "profile_rows.log").read_text()
    assert "rmsnorm:llama3-8b-prefill:Liger:500: skipped" in log
    assert "seconds 'soon' is not a whole number" in log
    assert (out / "gemm__qwen3-32b-down-decode-1__nodice.csv").exists()


def test_a_candidate_file_is_profiled_by_its_path() -> None:
    """IMPL ending in .py is a candidate file (its ``kernel``); a missing one is one line, not a
    traceback on the GPU machine."""
    import torch

    mod = _module()
    kernel = mod._impl("rmsnorm", "nodice/examples/rmsnorm/split_rows_small_batch.py", torch.device("cpu"))
    assert kernel.__module__ == "profiled_rmsnorm" and callable(kernel)
    assert mod._impl("rmsnorm", "nodice", torch.device("cpu")).__code__.co_filename.endswith(
        "nodice/kernels/rmsnorm.py"
    )
    with pytest.raises(SystemExit, match=r"no candidate file lab/none\.py"):
        mod._impl("rmsnorm", "lab/none.py", torch.device("cpu"))
