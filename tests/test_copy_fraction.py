"""A GB/s workload's distance to a copy of its own bytes (``copy_fraction``): measured on CUDA only,
once per workload and process; shown as its own column by `nodice check --bench` and in the kernel
benchmark's tables when present, absent otherwise."""

from __future__ import annotations

import io

import torch
from rich.console import Console

from nodice.bench.kernels import workload_record
from nodice.bench.kernels_table import task_rows
from nodice.evaluation.render import score_table
from nodice.measuring.score import GBPS, WorkloadScore
from nodice.measuring.throughput import BenchSession, benchmark, same_size_copy_gbps
from nodice.tasks import get_task
from tests.conftest import ROOT, load_kernel

CPU = torch.device("cpu")


def test_a_copy_of_the_same_bytes_is_timed_and_its_rate_counts_read_and_write() -> None:
    small, large = same_size_copy_gbps(1 << 12, CPU), same_size_copy_gbps(1 << 24, CPU)
    assert small > 0 and large > 0
    assert same_size_copy_gbps(1, CPU) > 0  # one byte still moves one byte each way


def test_a_session_times_each_workloads_copy_once() -> None:
    task = get_task("rmsnorm")
    session = BenchSession(task, CPU, torch.float32)
    w = task.small_workloads()[0]
    first = session.copy_gbps(w, task.bytes_moved(w, torch.float32))
    assert session.copy_gbps(w, 1.0) == first  # the cached value, not a copy of one byte


def test_on_cpu_no_copy_is_measured_and_the_tables_have_no_copy_column() -> None:
    task = get_task("rmsnorm")
    mod = load_kernel(ROOT / "nodice" / "kernels" / "rmsnorm.py", "rmsnorm_copy_fraction")
    workloads = task.small_workloads()[:1]
    scores = benchmark(task, mod.kernel, mod.kernel, CPU, torch.float32, 0, workloads)
    assert scores[0].unit == GBPS and scores[0].throughput > 0 and scores[0].copy_fraction is None
    header, _ = task_rows({"unit": GBPS, "workloads": [scores[0].to_dict() | {"name": "a"}]})
    assert "of copy, same size" not in header


def _text(scores: list[WorkloadScore]) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(score_table(scores, "t"))
    return out.getvalue()


def test_a_measured_copy_fraction_gets_its_column() -> None:
    a = WorkloadScore(
        "a", 0.1, unit=GBPS, throughput=900.0, score=900.0, limit_fraction=0.3, copy_fraction=0.97
    )
    b = WorkloadScore("b", 0.1, unit=GBPS, throughput=0.0, correct=False, detail="wrong")
    text = _text([a, b])
    assert "of copy, same size" in text and "97%" in text and "incorrect: wrong" in text
    assert "of copy" not in _text([WorkloadScore("a", 0.1, unit=GBPS, throughput=900.0, score=900.0)])
    entry = {
        "unit": GBPS,
        "geomean": 900.0,
        "workloads": [a.to_dict() | {"name": "a"}, b.to_dict() | {"name": "b"}],
    }
    header, rows = task_rows(entry)
    assert header[:4] == ["workload", "nodice GB/s", "of limit", "of copy, same size"]
    assert rows[0][:4] == ["a", "900", "30%", "97%"] and rows[1][1] == "incorrect"
    assert len(rows[1]) == len(header) and len(rows[0]) == len(header)
    # The round trip through a stored record keeps it.
    assert WorkloadScore.from_dict(a.to_dict()).copy_fraction == 0.97


def test_the_kernel_benchmarks_record_carries_it_when_measured() -> None:
    measured = WorkloadScore("a", 0.1, unit=GBPS, throughput=900.0, score=900.0, copy_fraction=0.9712345)
    assert workload_record(measured)["copy_fraction"] == 0.9712
    unmeasured = WorkloadScore("a", 0.1, unit=GBPS, throughput=1.0, score=1.0)
    assert "copy_fraction" not in workload_record(unmeasured)
