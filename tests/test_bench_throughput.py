"""The score vector on CPU: throughput per workload, baselines in the same run, ratios, ceilings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from nodice.evaluation.guards.guardian import Guardian
from nodice.gate.runtime import prepare
from nodice.loader import load_candidate
from nodice.measuring.ceilings import adopt_ceilings, ceilings_for, measure_ceilings
from nodice.measuring.score import (
    GBPS,
    LEGACY_UNIT,
    BaselineScore,
    WorkloadScore,
    baseline_levels,
    geomean_ratio_best,
    headline,
    score_unit,
)
from nodice.measuring.throughput import BenchSession, argument_names, benchmark, score_workload, throughput
from nodice.measuring.timing import CPU_POLICY, time_cpu
from nodice.tasks import Workload, get_task
from nodice.tasks.rmsnorm import RMSNorm

HOSTILE = Path(__file__).parent / "adversarial"
CPU = torch.device("cpu")


def _guarded(source: str, tmp_path: Path) -> Guardian:
    path = tmp_path / "cand.py"
    path.write_text(source)
    prepare(CPU)
    guardian = Guardian(get_task("rmsnorm"), CPU, torch.float32, seed=5)
    guardian(load_candidate(path, "kernel", 3))
    return guardian


def _bench(guardian: Guardian, **kw: Any) -> list[WorkloadScore]:
    assert guardian.guarded is not None and guardian.raw is not None
    return benchmark(get_task("rmsnorm"), guardian.guarded, guardian.raw, CPU, torch.float32, 5, **kw)


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


def test_honest_candidate_scores_its_throughput_beside_the_baseline(tmp_path: Path) -> None:
    guardian = _guarded((HOSTILE / "control_honest.py").read_text(), tmp_path)
    task = get_task("rmsnorm")
    scores = _bench(guardian)
    ceilings = ceilings_for(CPU)
    assert [s.workload for s in scores] == [w.name for w in task.small_workloads()]
    for s, w in zip(scores, task.small_workloads(), strict=True):
        assert s.correct and s.ms > 0 and s.unit == GBPS
        # GB/s of the fewest bytes the call must move, over the candidate's median time.
        assert s.score == s.throughput == pytest.approx(task.bytes_moved(w, torch.float32) / (s.ms * 1e6))
        assert s.gbps == pytest.approx(s.throughput) and s.tflops and s.tflops > 0
        assert s.limit_fraction == pytest.approx(s.throughput / ceilings.copy_gbps)
        b = s.baselines["torch F.rms_norm"]
        assert b.correct and b.throughput > 0 and b.ms > 0
        assert b.ratio == pytest.approx(s.throughput / b.throughput)
        assert s.best_baseline == "torch F.rms_norm" and s.ratio_best == pytest.approx(b.ratio)
        assert s.inputs["x"]["type"] == "random" and s.inputs["eps"] == {"type": "scalar", "value": 1e-6}
        assert "reference_ms" not in s.to_dict() and "speedup_vs_reference" not in s.to_dict()
    assert headline(scores) > 0 and score_unit(scores) == GBPS


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
    scores = _bench(guardian, workloads=workloads)
    assert scores[0].correct and scores[0].score > 0
    assert not scores[1].correct and scores[1].score == 0.0 and "outside" in scores[1].detail
    assert headline(scores) == 0.0


class _CountingRMSNorm(RMSNorm):
    """The real rmsnorm task, counting how often its reference runs."""

    def __init__(self) -> None:
        self.reference_calls = 0

    def reference(self, *args: Any) -> torch.Tensor:
        self.reference_calls += 1
        return super().reference(*args)


def test_reference_runs_once_per_workload_and_baselines_are_timed_once_per_session() -> None:
    task = _CountingRMSNorm()
    baseline_calls = []

    def counted_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        baseline_calls.append(1)
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    session = BenchSession(task, CPU, torch.float32)
    session.baselines, session._loaded = {"counted": counted_rms_norm}, True
    w = Workload("w", {"B": 8, "H": 512})

    def kernel(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    first = score_workload(task, kernel, kernel, w, CPU, torch.float32, 1, session)
    after_first = len(baseline_calls)
    second = score_workload(task, kernel, kernel, w, CPU, torch.float32, 2, session)
    assert first.correct and second.correct and after_first > 2
    assert len(baseline_calls) == after_first  # the second candidate reuses the baseline's timing
    assert second.baselines["counted"].ms == first.baselines["counted"].ms


def test_reference_is_not_timed() -> None:
    task = _CountingRMSNorm()
    session = BenchSession(task, CPU, torch.float32)
    session.baselines, session._loaded = {}, True

    def candidate(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    s = score_workload(
        task, candidate, candidate, Workload("w", {"B": 4, "H": 256}), CPU, torch.float32, 3, session
    )
    assert s.correct and task.reference_calls == 1


def test_ratios_pick_the_fastest_correct_baseline() -> None:
    s = WorkloadScore("w", 1.0, unit=GBPS, throughput=900.0, score=900.0)
    s.set_baselines(
        {
            "slow": BaselineScore(ms=2.0, throughput=450.0),
            "fast": BaselineScore(ms=0.8, throughput=1000.0, bi="bi_violation"),
            "wrong": BaselineScore(ms=0.1, throughput=0.0, correct=False, detail="off by 2"),
        }
    )
    assert s.best_baseline == "fast" and s.ratio_best == pytest.approx(0.9)
    assert s.baselines["slow"].ratio == pytest.approx(2.0) and s.baselines["wrong"].ratio == 0.0
    t = WorkloadScore("v", 1.0, unit=GBPS, throughput=2000.0, score=2000.0)
    t.set_baselines({"slow": BaselineScore(ms=1.0, throughput=500.0), "fast": BaselineScore(1.0, 1000.0)})
    assert geomean_ratio_best([s, t]) == pytest.approx((0.9 * 2.0) ** 0.5)
    assert baseline_levels([s, t]) == pytest.approx({"slow": (450 * 500) ** 0.5, "fast": 1000.0})


def test_an_incorrect_candidate_has_no_ratio_above_zero() -> None:
    s = WorkloadScore("w", 0.0, unit=GBPS, correct=False)
    s.set_baselines({"b": BaselineScore(ms=1.0, throughput=100.0)})
    assert s.score == 0.0 and s.ratio_best == 0.0


def test_score_round_trips_and_legacy_records_still_read() -> None:
    s = WorkloadScore("w", 1.0, unit=GBPS, throughput=3.0, score=3.0, params={"B": 1})
    s.set_baselines({"b": BaselineScore(ms=2.0, throughput=1.5, bi="pass")})
    assert WorkloadScore.from_dict(s.to_dict()) == s
    # A record written when the score was the speedup over the reference: baselines were times in ms.
    legacy = {"workload": "w", "ms": 1.0, "score": 1.4, "speedup_vs_reference": 1.4, "reference_ms": 1.4}
    old = WorkloadScore.from_dict({**legacy, "baselines": {"torch F.rms_norm": 1.2}})
    assert old.unit == LEGACY_UNIT and old.is_legacy and old.speedup_vs_reference == 1.4
    assert old.baselines["torch F.rms_norm"].ms == 1.2 and score_unit([legacy]) == LEGACY_UNIT


def test_throughput_uses_the_tasks_unit() -> None:
    gemm, norm = get_task("gemm"), get_task("rmsnorm")
    w = Workload("g", {"M": 128, "K": 256, "N": 512})
    value, tflops, gbps = throughput(gemm, w, torch.bfloat16, 0.5)
    assert value == tflops == pytest.approx(2 * 128 * 256 * 512 / 0.5e-3 / 1e12) and gbps
    n = Workload("n", {"B": 16, "H": 1024})
    assert throughput(norm, n, torch.bfloat16, 0.01)[0] == pytest.approx(
        (2 * 16 * 1024 + 1024) * 2 / 1e-5 / 1e9
    )


def test_ceilings_are_measured_on_the_device_and_adopted_by_later_processes() -> None:
    c = measure_ceilings(CPU)
    assert c.matmul_tflops > 0 and c.copy_gbps > 0 and c.matmul_dtype == "float32"
    assert set(c.limits()) == {"float32_tflops", "copy_gbps"} and "random data" in c.method
    assert c.for_unit(GBPS) == c.copy_gbps and c.for_unit("TFLOP/s") == c.matmul_tflops
    adopted = adopt_ceilings(torch.device("cpu"), {**c.to_dict(), "copy_gbps": 123.0})
    assert ceilings_for(CPU) is adopted and adopted.copy_gbps == 123.0


@pytest.mark.gpu
def test_cuda_timer_flushes_and_settles() -> None:
    from nodice.measuring.timing import CUDA_POLICY, time_cuda

    x = torch.randn(4096, 4096, device="cuda")
    t = time_cuda(lambda a: a * 2, (x,))
    assert CUDA_POLICY.min_reps <= t.reps <= CUDA_POLICY.max_reps and t.ms > 0


def test_the_cuda_head_start_covers_the_hosts_enqueue_time() -> None:
    from nodice.measuring.timing import (
        HEAD_START_CLOCK_HZ,
        MAX_HEAD_START_CYCLES,
        MIN_HEAD_START_CYCLES,
        head_start_cycles,
    )

    # A fast launcher keeps the minimum; a slow one gets a sleep covering its chunk twice over.
    assert head_start_cycles(2e-6, 10) == MIN_HEAD_START_CYCLES
    slow = head_start_cycles(60e-6, 10)
    assert slow / HEAD_START_CLOCK_HZ >= 2 * 10 * 60e-6 * 0.999
    # A call that waits for the GPU itself (seconds of host time) is capped at about 10 ms.
    assert head_start_cycles(2.0, 10) == MAX_HEAD_START_CYCLES
    assert MAX_HEAD_START_CYCLES / HEAD_START_CLOCK_HZ <= 0.011


@pytest.mark.gpu
def test_cuda_timer_times_the_gpu_not_the_launcher() -> None:
    import time as _time

    from nodice.measuring.timing import time_cuda

    x = torch.randn(1024, device="cuda")

    def slow_launch(a: torch.Tensor) -> torch.Tensor:
        _time.sleep(200e-6)  # host work before a tiny kernel: the GPU must not idle on the clock
        return a * 2

    fast = time_cuda(lambda a: a * 2, (x,))
    slow = time_cuda(slow_launch, (x,))
    assert slow.ms < fast.ms + 0.05, (slow.ms, fast.ms)
