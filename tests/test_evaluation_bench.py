"""Benchmark and score vector on CPU: medians, per-workload correctness, geomean, baselines."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodice.bench.score import WorkloadScore, headline
from nodice.bench.timing import CPU_POLICY, argument_names, benchmark, time_cpu
from nodice.evaluation.guards.guardian import Guardian
from nodice.gate.loader import load_candidate
from nodice.gate.runtime import prepare
from nodice.tasks import Workload, get_task

HOSTILE = Path(__file__).parent / "adversarial"
CPU = torch.device("cpu")


def _guarded(source: str, tmp_path: Path) -> Guardian:
    path = tmp_path / "cand.py"
    path.write_text(source)
    prepare(CPU)
    guardian = Guardian(get_task("rmsnorm"), CPU, torch.float32, seed=5)
    guardian(load_candidate(path, "kernel", 3))
    return guardian


def test_argument_names_come_from_the_signature() -> None:
    assert argument_names(get_task("rmsnorm")) == ["x", "weight", "eps"]


def test_cpu_timer_takes_the_median_of_a_settled_series() -> None:
    calls = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x * 2

    t = time_cpu(fn, (torch.ones(4),))
    assert CPU_POLICY.min_reps <= t.reps <= CPU_POLICY.max_reps
    assert len(calls) == t.reps + 1  # one warm-up
    assert t.ms > 0 and torch.equal(t.last, torch.full((4,), 2.0))


def test_honest_candidate_scores_every_workload(tmp_path: Path) -> None:
    guardian = _guarded((HOSTILE / "control_honest.py").read_text(), tmp_path)
    task = get_task("rmsnorm")
    scores = benchmark(task, guardian, CPU, torch.float32, seed=5)
    assert [s.workload for s in scores] == [w.name for w in task.small_workloads()]
    for s in scores:
        assert s.correct and s.ms > 0 and s.reference_ms > 0 and s.score == s.speedup_vs_reference > 0
        assert s.gbps and s.gbps > 0 and s.tflops and s.tflops > 0
        assert "torch F.rms_norm" in s.baselines and s.speedup_vs_baselines["torch F.rms_norm"] > 0
        assert s.inputs["x"]["type"] == "random" and s.inputs["eps"] == {"type": "scalar", "value": 1e-6}
    assert headline(scores) > 0


def test_a_workload_the_candidate_gets_wrong_scores_zero(tmp_path: Path) -> None:
    # Right on the gate's sizes (hidden 1024), wrong on wider rows.
    source = (
        "import torch\n\n"
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)\n"
        "    y = (xf * rstd * weight.float()).to(x.dtype)\n"
        "    return y if x.shape[-1] <= 1024 else y * 1.5\n"
    )
    guardian = _guarded(source, tmp_path)
    workloads = [Workload("narrow", {"B": 8, "H": 1024}), Workload("wide", {"B": 2, "H": 2048})]
    scores = benchmark(get_task("rmsnorm"), guardian, CPU, torch.float32, seed=5, workloads=workloads)
    assert scores[0].correct and scores[0].score > 0
    assert not scores[1].correct and scores[1].score == 0.0 and "outside" in scores[1].detail
    assert headline(scores) == 0.0


def test_score_round_trips_through_a_dict() -> None:
    s = WorkloadScore("w", 1.0, None, 2.0, 3.0, {"b": 2.0}, 3.0, reference_ms=3.0, params={"B": 1})
    d = s.to_dict()
    assert d["speedup_vs_baselines"] == {"b": 2.0}
    assert WorkloadScore.from_dict(d) == s


@pytest.mark.gpu
def test_cuda_timer_flushes_and_settles() -> None:
    from nodice.bench.timing import CUDA_POLICY, time_cuda

    x = torch.randn(4096, 4096, device="cuda")
    t = time_cuda(lambda a: a * 2, (x,))
    assert CUDA_POLICY.min_reps <= t.reps <= CUDA_POLICY.max_reps and t.ms > 0
