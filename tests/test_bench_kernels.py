"""``nodice bench kernels`` on CPU: one real run of the rmsnorm kernel, the SPEC §6 JSON, resume, tables."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nodice.bench.kernels_table import invariant_ratios, markdown, task_rows
from nodice.kernels import bundled_kernel, is_seed
from tests.conftest import run_cli
from tests.evolution_helpers import made_once

ROOT = Path(__file__).resolve().parents[1]


def _nodice(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def rmsnorm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``nodice bench kernels --task rmsnorm`` on CPU with its JSON and Markdown reports, run once per
    test session, under xdist too; a fresh copy of the reports for each module that asks."""

    def make(partial: Path) -> None:
        partial.mkdir()
        proc = _nodice(
            "bench", "kernels", "--device", "cpu", "--task", "rmsnorm", "--json", str(partial / "k.json"),
            "--markdown", str(partial / "k.md"),
        )  # fmt: skip
        (partial / "proc.json").write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))

    done = made_once(tmp_path_factory, "kernels-warmed", make)
    out = tmp_path_factory.mktemp("kernels")
    for name in ("k.json", "k.md"):
        if (done / name).exists():
            shutil.copy(done / name, out / name)
    code, stdout, stderr = json.loads((done / "proc.json").read_text())
    return subprocess.CompletedProcess(["nodice", "bench", "kernels"], code, stdout, stderr), out


def unwarmed_rmsnorm_report(factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of ``nodice bench kernels --task rmsnorm --warm-workers 0`` on CPU (no warm-up phase:
    the measuring phase audits the baselines itself), made once per test session, under xdist too; a
    fresh copy for each caller. The local run the Ray tests compare a cluster's report with."""

    def make(partial: Path) -> None:
        proc = _nodice(
            "bench", "kernels", "--device", "cpu", "--task", "rmsnorm", "--json", str(partial),
            "--warm-workers", "0",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]

    report = made_once(factory, "kernels-unwarmed.json", make)
    return dict(json.loads(report.read_text()))


def test_the_report_has_every_field_spec_pins(rmsnorm_run: tuple[Any, Path]) -> None:
    proc, out = rmsnorm_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "k.json").read_text())
    assert {"device", "date", "versions", "limits", "tasks"} <= set(report)
    assert set(report["limits"]) == {"float32_tflops", "copy_gbps"} and report["limits"]["copy_gbps"] > 0
    assert {"torch", "triton", "python", "commit"} <= set(report["versions"])
    entry = report["tasks"]["rmsnorm"]
    assert entry["kernel"] == "nodice/kernels/rmsnorm.py" and entry["unit"] == "GB/s"
    assert entry["verdict"] == "pass" and entry["geomean"] > 0
    assert entry["baselines_bi"]["torch F.rms_norm"]["verdict"] == "pass"
    for w in entry["workloads"]:
        assert w["throughput"] > 0 and w["limit_fraction"] > 0 and w["correct"]
        b = w["baselines"]["torch F.rms_norm"]
        assert b["throughput"] > 0 and b["bi"] == "pass"
        assert w["ratio_best"] == pytest.approx(w["throughput"] / b["throughput"], rel=1e-3)
    # The warm-up phase ran first: the baseline was audited there, and its verdict handed over.
    warm = report["warm_up"]
    assert warm["jobs"] == 2 and warm["statuses"] == {"ok": 2}  # the baseline's job, the gate
    assert entry["baselines_audited_in_warm_up"] == ["torch F.rms_norm"] and entry["warm_up_s"] > 0
    md = (out / "k.md").read_text()
    assert "### rmsnorm" in md and "torch F.rms_norm (BI)" in md and "| **geomean** |" in md
    assert "rmsnorm" in proc.stdout and "GB/s" in proc.stdout


def test_resume_keeps_finished_tasks(rmsnorm_run: tuple[Any, Path]) -> None:
    _, out = rmsnorm_run
    before = (out / "k.json").read_text()
    proc = _nodice(
        "bench", "kernels", "--device", "cpu", "--task", "rmsnorm", "--json", str(out / "k.json"), "--resume"
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = json.loads((out / "k.json").read_text())
    assert after["tasks"] == json.loads(before)["tasks"] and "resumed" not in after


def test_a_resumed_call_keeps_both_calls_provenance(rmsnorm_run: tuple[Any, Path], tmp_path: Path) -> None:
    _, out = rmsnorm_run
    first = json.loads((out / "k.json").read_text())
    partial = dict(first, tasks={"layernorm": first["tasks"]["rmsnorm"]})  # one task done, rmsnorm not
    # A report of another machine is not continued here: its rows would be compared with this one's.
    elsewhere = json.dumps(dict(partial, device="NVIDIA H200; host another CPU, 64 cores"))
    (tmp_path / "k.json").write_text(elsewhere)
    proc = _nodice(
        "bench", "kernels", "--device", "cpu", "--task", "rmsnorm",
        "--json", str(tmp_path / "k.json"), "--resume",
    )  # fmt: skip
    assert proc.returncode == 2 and "was measured on NVIDIA H200; host another CPU" in proc.stderr
    assert (tmp_path / "k.json").read_text() == elsewhere
    (tmp_path / "k.json").write_text(json.dumps(partial))
    proc = _nodice(
        "bench", "kernels", "--device", "cpu", "--task", "layernorm", "--task", "rmsnorm",
        "--json", str(tmp_path / "k.json"), "--markdown", str(tmp_path / "k.md"), "--resume",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = json.loads((tmp_path / "k.json").read_text())
    assert list(after["tasks"]) == ["layernorm", "rmsnorm"]
    assert after["command"] == first["command"] and after["warm_up"] == first["warm_up"]
    (call,) = after["resumed"]
    assert call["command"].endswith("--resume") and call["warm_up"]["jobs"] > 0
    assert f"Resumed {call['date']}: `{call['command']}`." in (tmp_path / "k.md").read_text()


def test_without_warm_up_the_measuring_phase_audits(
    rmsnorm_run: tuple[Any, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, out = rmsnorm_run
    report = unwarmed_rmsnorm_report(tmp_path_factory)
    warmed = json.loads((out / "k.json").read_text())
    assert "warm_up" not in report and "baselines_audited_in_warm_up" not in report["tasks"]["rmsnorm"]
    # The same verdict either way: the warm-up only moves the audit, it does not change it.
    assert report["tasks"]["rmsnorm"]["baselines_bi"] == warmed["tasks"]["rmsnorm"]["baselines_bi"]


def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    proc = _nodice("bench", "kernels", "--device", "cpu", "--task", "nope")
    assert proc.returncode == 2 and proc.stderr.strip().startswith("unknown task(s): nope")
    proc = _nodice("bench", "kernels", "--device", "cpu", "--task", "rmsnorm", "--resume")
    assert proc.returncode == 2 and "--resume needs --json" in proc.stderr
    (tmp_path / "bad.json").write_text("[1, 2]")
    proc = _nodice("bench", "kernels", "--device", "cpu", "--json", str(tmp_path / "bad.json"), "--resume")
    assert proc.returncode == 2 and "not a kernel benchmark report" in proc.stderr
    assert "Traceback" not in proc.stderr
    # Reports that cannot be continued, a folder given as the report, a limit that is no limit: one
    # line each (no progress bar after it), before any task runs.
    (tmp_path / "binary.json").write_bytes(b"\x9b\xd8garbage")
    (tmp_path / "task.json").write_text('{"tasks": {"rmsnorm": 3}}')
    for args, expected in (
        (["--json", str(tmp_path / "binary.json"), "--resume"], "cannot read"),
        (["--json", str(tmp_path / "task.json"), "--resume"], "task rmsnorm is not an object"),
        (["--json", str(tmp_path)], "is a folder: give a file name"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
    ):
        proc = _nodice("bench", "kernels", "--device", "cpu", "--task", "rmsnorm", *args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and expected in lines[0], proc.stderr


def test_bundled_kernel_falls_back_to_the_seed() -> None:
    path = bundled_kernel("gemm")
    assert path.is_file() and (is_seed(path) or path.parent.name == "kernels")


def test_tables_show_missing_and_incorrect_entries() -> None:
    entry = {
        "kernel": "nodice/kernels/x.py",
        "unit": "TFLOP/s",
        "verdict": "pass",
        "geomean": 500.0,
        "ratio_best_geomean": 0.9,
        "baseline_geomeans": {"lib": 550.0},
        "baselines_bi": {"lib": {"verdict": "bi_violation", "detail": "batch=7"}},
        "baselines_missing": {"other lib": "other-lib is not installed"},
        "workloads": [
            {
                "name": "a",
                "throughput": 500.0,
                "limit_fraction": 0.64,
                "correct": True,
                "baselines": {"lib": {"throughput": 550.0, "ratio": 0.909}},
                "ratio_best": 0.909,
            },
            {"name": "b", "throughput": 0.0, "correct": False, "baselines": {}, "ratio_best": None},
        ],
    }
    header, rows = task_rows(entry)
    assert header == ["workload", "nodice TFLOP/s", "of limit", "lib (not BI)", "× best"]
    assert rows[0] == ["a", "500", "64%", "550 (0.91×)", "0.91×"] and rows[1][1] == "incorrect"
    md = markdown({"date": "d", "device": "GPU", "versions": {}, "limits": {}, "tasks": {"x": entry}})
    assert "Missing baseline other lib: other-lib is not installed" in md


def test_the_invariant_baselines_come_first_with_their_own_ratio() -> None:
    entry = {
        "unit": "TFLOP/s",
        "geomean": 400.0,
        "ratio_best_geomean": 0.8,
        "baseline_geomeans": {"fast": 500.0, "bi lib": 320.0, "slow bi": 100.0},
        "baselines_bi": {
            "fast": {"verdict": "bi_violation"},
            "bi lib": {"verdict": "pass"},
            "slow bi": {"verdict": "pass"},
        },
        "workloads": [
            {
                "name": "a",
                "throughput": 400.0,
                "correct": True,
                "baselines": {
                    "fast": {"throughput": 500.0, "ratio": 0.8},
                    "bi lib": {"throughput": 320.0, "ratio": 1.25},
                    "slow bi": {"throughput": 100.0, "ratio": 4.0},
                },
                "ratio_best": 0.8,
            },
            {
                "name": "b",
                "throughput": 400.0,
                "correct": True,
                # A baseline that was wrong on this workload is no one's best.
                "baselines": {
                    "fast": {"throughput": 500.0, "ratio": 0.8},
                    "bi lib": {"throughput": 800.0, "ratio": 0.5, "correct": False},
                    "slow bi": {"throughput": 200.0, "ratio": 2.0},
                },
                "ratio_best": 0.8,
            },
        ],
    }
    header, rows = task_rows(entry)
    assert header == [
        "workload",
        "nodice TFLOP/s",
        "of limit",
        "bi lib (BI)",
        "slow bi (BI)",
        "× best BI",
        "fast (not BI)",
        "× best",
    ]
    assert rows[0][3:] == ["320 (1.25×)", "100 (4.00×)", "1.25×", "500 (0.80×)", "0.80×"]
    assert rows[1][5] == "2.00×"
    ratios, geomean_bi = invariant_ratios(entry)
    assert ratios == [1.25, 2.0] and geomean_bi == pytest.approx((1.25 * 2.0) ** 0.5)
    assert rows[2][5] == f"{geomean_bi:.2f}×"


def test_an_unknown_workload_is_a_one_line_error() -> None:
    proc = _nodice("bench", "kernels", "--device", "cpu", "--task", "rmsnorm", "--workload", "nope")
    line = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in line
    assert line.endswith("--workload nope: no such cpu workload (see `nodice tasks`)")
    proc = _nodice("bench", "kernels", "--device", "cpu", "--task", "rmsnorm", "--workload", "gemm:cpu-small")
    assert proc.returncode == 2 and "task gemm is not among the benchmarked tasks" in proc.stderr
