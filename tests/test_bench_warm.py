"""The kernel benchmark's warm-up phase on CPU: real worker processes, real audits, real failures."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from nodice.bench.warm import WarmJob, WarmReport, WarmResult, plan, warm_up
from nodice.evaluation.forkserver import ADDRESS_VARIABLE
from nodice.kernels import bundled_kernel
from nodice.measuring.baselines import audit_baseline, baselines_for, load_baselines
from nodice.measuring.baselines.audit import DtypeAudit, combine_audits, dtype_name
from nodice.measuring.throughput import BenchSession
from nodice.tasks import get_task

CPU = torch.device("cpu")


def test_the_plan_has_one_job_per_baseline_and_dtype_and_every_gate() -> None:
    tasks = ["rmsnorm", "gemm"]
    jobs = plan(tasks, {t: bundled_kernel(t) for t in tasks}, CPU)
    # Longest first: the baselines' jobs (audit + every workload), tasks interleaved, then the gates.
    assert [(j.kind, j.task) for j in jobs] == [
        ("baseline", "rmsnorm"),
        ("baseline", "gemm"),
        ("gate", "rmsnorm"),
        ("gate", "gemm"),
    ]
    rms, gemm = jobs[0], jobs[1]
    assert (rms.target, rms.dtype, rms.probe) == ("torch F.rms_norm", "float32", False)
    # One process walks every workload of a baseline, in the benchmark's order: each kernel compiles once.
    assert gemm.workloads == tuple(w.name for w in get_task("gemm").bench_workloads(CPU))
    assert [j.target for j in jobs if j.kind == "gate"] == [str(bundled_kernel(t)) for t in tasks]
    only = plan(["gemm"], {"gemm": bundled_kernel("gemm")}, CPU, {"gemm": ["cpu-decode"]})
    assert only[0].workloads == ("cpu-decode",)
    assert WarmJob.from_dict({**only[0].__dict__, "workloads": ["cpu-decode"]}) == only[0]


def test_a_probe_dtype_is_its_own_job_without_calls() -> None:
    cuda = torch.device("cuda")  # planning imports no library and touches no GPU
    jobs = plan(["gemm"], {"gemm": bundled_kernel("gemm")}, cuda)
    baseline_jobs = [j for j in jobs if j.kind == "baseline"]
    names = list(dict.fromkeys(j.target for j in baseline_jobs))
    assert names == [b.name for b in baselines_for("gemm", cuda)]
    for name in names:  # each baseline: its audit in the task's dtype with the workloads, then the probe
        assert [(j.dtype, j.probe, bool(j.workloads)) for j in baseline_jobs if j.target == name] == [
            ("bfloat16", False, True),
            ("float32", True, False),
        ], name


def test_warm_up_audits_agree_with_auditing_in_process() -> None:
    tasks = ["rmsnorm", "gemm"]
    jobs = [j for j in plan(tasks, {t: bundled_kernel(t) for t in tasks}, CPU) if j.kind != "gate"]
    report = warm_up(jobs, "cpu", seed=0, workers=2)
    assert all(r.detail == "" for r in report.results)  # every workload call ran
    assert report.workers == 2 and len(report.results) == len(jobs)
    assert {r.status for r in report.results} == {"ok"}, [r.to_dict() for r in report.results]
    for task_name, name in (("rmsnorm", "torch F.rms_norm"), ("gemm", "torch.mm")):
        impls, _ = load_baselines(task_name, CPU)
        here = audit_baseline(task_name, impls[name], CPU, 0, name=name)
        handed = report.audits(task_name, ["float32"])[name]
        assert handed["verdict"] == here.verdict
        # A library's non-invariant output depends on the process's threads and load, so a mismatch's
        # values (and the context that shows it first) differ between processes: compare the verdict.
        # A pass's detail is only a count of contexts, the same anywhere.
        if here.verdict == "pass":
            assert handed["detail"] == here.detail
        else:
            assert " differs in context " in handed["detail"] and " differs in context " in here.detail
    # OpenBLAS changes its blocking with M on CPU: torch.mm is not batch-invariant there.
    assert report.audits("gemm", ["float32"])["torch.mm"]["verdict"] == "bi_violation"
    summary = report.summary()
    assert (
        summary["jobs"] == len(jobs) and summary["statuses"] == {"ok": len(jobs)} and not summary["not_done"]
    )


def test_failures_are_results_and_the_next_job_still_runs() -> None:
    jobs = [
        WarmJob(
            "baseline", "gemm", "torch.mm", dtype="float32", workloads=("no-such-workload", "cpu-decode")
        ),
        WarmJob("baseline", "gemm", "no such baseline", dtype="float32"),
        WarmJob("baseline", "no-such-task", "torch.mm", dtype="float32"),
        WarmJob("baseline", "rmsnorm", "torch F.rms_norm", dtype="float32"),
    ]
    report = warm_up(jobs, "cpu", workers=1)
    by_label = {r.job.label(): r for r in report.results}
    assert [r.job for r in report.results] == jobs  # one worker: in order, none lost
    # A workload call that fails is noted; the audit and the other calls still count.
    partial = by_label[jobs[0].label()]
    assert partial.status == "ok" and partial.audit is not None
    assert partial.detail == "calls failed: no-such-workload: no such workload"
    missing = by_label[jobs[1].label()]
    assert missing.status == "missing" and "no baseline 'no such baseline'" in missing.detail
    unknown = by_label[jobs[2].label()]
    assert unknown.status == "failed" and "no-such-task" in unknown.detail and "\n" not in unknown.detail
    assert by_label[jobs[3].label()].status == "ok"


def test_a_job_past_its_time_is_killed_and_a_fresh_worker_takes_the_next() -> None:
    jobs = [
        WarmJob("gate", "rmsnorm", str(bundled_kernel("rmsnorm"))),  # seconds: an isolated evaluation
        WarmJob("baseline", "rmsnorm", "torch F.rms_norm", dtype="float32"),
    ]
    report = warm_up(jobs, "cpu", workers=1, job_timeout_s=1.5)
    first, second = report.results
    assert first.status == "timeout" and "killed" in first.detail
    # The replacement worker imports torch again; the audit itself is quick.
    assert second.status == "ok" and second.audit is not None and second.audit["verdict"] == "pass"


def _worker_pids(parent: int | None = None, marker: bytes = b"nodice.bench.warm") -> list[int]:
    """The processes ``parent`` (this one by default) started whose command line holds ``marker``."""
    parent = os.getpid() if parent is None else parent
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text().split()
        except OSError:
            continue
        if any(marker in part for part in cmd) and int(stat[3]) == parent:
            pids.append(int(entry.name))
    return pids


def test_a_worker_that_dies_is_reported_and_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # The warm-up worker's gate process must be its own child to be found: no shared fork server.
    monkeypatch.delenv(ADDRESS_VARIABLE, raising=False)
    jobs = [
        WarmJob("gate", "rmsnorm", str(bundled_kernel("rmsnorm"))),
        WarmJob("baseline", "rmsnorm", "torch F.rms_norm", dtype="float32"),
    ]
    killed: list[int] = []

    def kill_the_first_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            pids = _worker_pids()
            # Once the worker has started the gate's own process, the first job is under way.
            if pids and _worker_pids(pids[0], b""):
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(0.1)

    killer = threading.Thread(target=kill_the_first_worker)
    killer.start()
    report = warm_up(jobs, "cpu", workers=1, job_timeout_s=120)
    killer.join()
    assert killed
    first, second = report.results
    assert first.status == "crashed" and "the worker exited (-9)" in first.detail
    assert second.status == "ok"


def _audit(dtype: str, verdict: str, detail: str = "", contexts: int = 3) -> DtypeAudit:
    return DtypeAudit(dtype, verdict, detail, contexts)  # type: ignore[arg-type]


def test_combining_per_dtype_audits_keeps_the_audit_order() -> None:
    both = combine_audits([_audit("bfloat16", "pass"), _audit("float32", "pass", contexts=4)], "cuda")
    assert both.verdict == "pass" and both.detail == "7 contexts on cuda in bfloat16, float32"
    skipped = combine_audits(
        [_audit("bfloat16", "pass"), _audit("float32", "skipped", "not accepted: half only")], "cuda"
    )
    assert skipped.verdict == "pass" and skipped.detail.endswith("skipped float32 not accepted: half only")
    probe_found = combine_audits(
        [_audit("bfloat16", "pass"), _audit("float32", "bi_violation", "o[0] …")], "cuda"
    )
    assert probe_found.verdict == "bi_violation" and probe_found.dtypes == ("bfloat16", "float32")
    assert probe_found.detail == "in float32 (bfloat16 passed): o[0] …"
    task_dtype = combine_audits([_audit("bfloat16", "bi_violation", "o[1] …")], "cuda")
    assert task_dtype.detail == "in bfloat16: o[1] …"
    first_wins = combine_audits(
        [_audit("bfloat16", "error", "boom"), _audit("float32", "bi_violation")], "cuda"
    )
    assert (first_wins.verdict, first_wins.detail) == ("error", "boom")
    assert DtypeAudit.from_dict(_audit("float32", "pass").to_dict()) == _audit("float32", "pass")


def test_warm_report_hands_over_only_complete_verdicts() -> None:
    job = WarmJob("baseline", "gemm", "torch.mm", dtype="bfloat16", workloads=("llama3-8b-o-decode",))
    probe = WarmJob("baseline", "gemm", "torch.mm", dtype="float32", probe=True)
    report = WarmReport(device_type="cuda")
    report.results.append(WarmResult(job, "ok", 2.0, audit=_audit("bfloat16", "pass").to_dict()))
    # The probe's job timed out: no verdict for this baseline, the measuring phase audits it.
    report.results.append(WarmResult(probe, "timeout", 600.0, "no result after 600 s"))
    assert report.audits("gemm", ["bfloat16", "float32"]) == {}
    report.results[1] = WarmResult(probe, "ok", 3.0, audit=_audit("float32", "pass").to_dict())
    handed = report.audits("gemm", ["bfloat16", "float32"])["torch.mm"]
    assert handed["verdict"] == "pass" and handed["s"] == 5.0
    # A library error is not handed over either: it may be the concurrency's (memory), not the library's.
    report.results[1] = WarmResult(probe, "ok", 3.0, audit=_audit("float32", "error", "OOM").to_dict())
    assert report.audits("gemm", ["bfloat16", "float32"]) == {}


def test_bench_session_takes_given_verdicts_and_audits_the_rest() -> None:
    task = get_task("rmsnorm")
    given = {"torch F.rms_norm": {"verdict": "bi_violation", "detail": "from the warm-up", "s": 1.5}}
    session = BenchSession(task, CPU, torch.float32, audit_baselines=True, given_audits=given)
    session.load()
    assert session.bi["torch F.rms_norm"] == "bi_violation" and session.audit_s["torch F.rms_norm"] == 1.5
    assert session.bi_detail["torch F.rms_norm"] == "from the warm-up"
    unusable = {"torch F.rms_norm": {"verdict": "error", "detail": "CUDA out of memory"}}
    session = BenchSession(task, CPU, torch.float32, audit_baselines=True, given_audits=unusable)
    session.load()
    assert (
        session.bi["torch F.rms_norm"] == "pass"
        and "contexts on cpu" in session.bi_detail["torch F.rms_norm"]
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dtype_names_round_trip(dtype: torch.dtype) -> None:
    assert getattr(torch, dtype_name(dtype)) is dtype
