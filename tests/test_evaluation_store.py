"""Result store and Trace export: every evaluation kept, nothing lost to a kill, FlashInfer-Bench shape."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from nodice.evaluation.export import export_jsonl, export_store, trace_records
from nodice.evaluation.guards.guardian import Guardian
from nodice.evaluation.record import Evaluation
from nodice.evaluation.store import ResultStore
from nodice.gate.pipeline import check
from nodice.gate.result import CheckResult, StageResult
from nodice.gate.runtime import prepare
from nodice.measuring.throughput import benchmark
from nodice.tasks import get_task

HOSTILE = Path(__file__).parent / "adversarial"
CPU = torch.device("cpu")


def _passed_evaluation() -> Evaluation:
    """A real gate result and score vector for the honest control (dynamic stage skipped for speed)."""
    path = HOSTILE / "control_honest.py"
    task = get_task("rmsnorm")
    prepare(CPU)  # the interpreter's patches belong to the harness, installed before its snapshot
    guardian = Guardian(task, CPU, torch.float32, seed=2)
    result = check(path, "rmsnorm", device="cpu", seed=2, static=False, dynamic=False, guard=guardian)
    assert result.verdict == "pass", result.reason
    assert guardian.guarded is not None and guardian.raw is not None
    scores = benchmark(task, guardian.guarded, guardian.raw, CPU, torch.float32, seed=2)
    return Evaluation(
        check=result,
        scores=scores,
        ms=12.5,
        task="rmsnorm",
        candidate=str(path),
        sha256="ab" * 32,
        source=path.read_text(),
        seed=2,
        run_id="run-1",
        device="cpu",
        isolation="persistent",
        timings={"correctness": 1.0},
        environment={"torch": torch.__version__, "cpu": "x86_64"},
        timestamp="2026-01-01T00:00:00+00:00",
    )


def _cheat_evaluation() -> Evaluation:
    check_result = CheckResult("cheat", "rmsnorm", "c.py", "cpu", "float32", cheat_rule="library-call")
    check_result.reason = "cheat (library-call): c.py:3 uses .rms_norm"
    check_result.stages.append(StageResult("guards", "reject", 0.5, check_result.reason))
    return Evaluation(check_result, [], 3.0, "rmsnorm", "c.py", "cd" * 32, "import torch\n", run_id="run-2")


def test_store_round_trip_and_filters(tmp_path: Path) -> None:
    passed, cheat = _passed_evaluation(), _cheat_evaluation()
    with ResultStore(tmp_path / "e.sqlite") as store:
        first = store.save(passed)
        store.save(cheat)
        store.save(passed)  # same source again: stored once, evaluated twice
        assert store.count() == 3 and store.count("run-1") == 2
        back = store.get(first)
        assert back is not None
        assert back.to_dict() == passed.to_dict()
        assert [e.verdict for e in store.evaluations(verdict="cheat")] == ["cheat"]
        assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_trace_export_has_flashinfer_bench_shape(tmp_path: Path) -> None:
    passed, cheat = _passed_evaluation(), _cheat_evaluation()
    traces = trace_records(passed)
    assert len(traces) == len(passed.scores)
    t = traces[0]
    assert set(t) == {"definition", "workload", "solution", "evaluation"}
    assert t["definition"] == "rmsnorm" and t["solution"].startswith("control_honest-")
    assert (
        set(t["workload"]) >= {"axes", "inputs", "uuid"} and t["workload"]["axes"] == passed.scores[0].params
    )
    ev = t["evaluation"]
    assert ev["status"] == "PASSED" and ev["environment"]["libs"]["torch"] == torch.__version__
    assert ev["correctness"]["max_absolute_error"] >= 0 and ev["performance"]["latency_ms"] > 0
    # The reference is not timed: no speedup over it (FlashInfer-Bench's default fills in), null in
    # extra beside the ratio to the fastest baseline, which was measured.
    measured = ev["correctness"]["extra"]["performance"]
    assert "speedup_factor" not in ev["performance"] and measured["speedup_factor"] is None
    assert measured["ratio_best"] > 0
    assert ev["correctness"]["extra"]["batch_invariance"]["verdict"] == "pass"
    # FlashInfer-Bench has no status for a gate rejection: a cheat is INCORRECT_NUMERICAL, verdict in extra.
    (c,) = trace_records(cheat)
    assert c["evaluation"]["status"] == "INCORRECT_NUMERICAL" and c["evaluation"]["performance"] is None
    assert c["evaluation"]["correctness"]["extra"]["batch_invariance"]["cheat_rule"] == "library-call"
    assert c["evaluation"]["log"].startswith("nodice batch invariance: cheat")

    db = tmp_path / "e.sqlite"
    with ResultStore(db) as store:
        store.save(passed)
        store.save(cheat)
    out = tmp_path / "traces.jsonl"
    assert export_store(db, out) == len(traces) + 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[-1]["evaluation"]["correctness"]["extra"]["batch_invariance"]["verdict"] == "cheat"
    assert export_jsonl([cheat], tmp_path / "one.jsonl") == 1


_WRITER = textwrap.dedent(
    """
    import sys
    from nodice.evaluation.record import Evaluation
    from nodice.evaluation.store import ResultStore
    from nodice.gate.result import CheckResult

    store = ResultStore(sys.argv[1])
    i = 0
    while True:
        e = Evaluation(CheckResult("error", "rmsnorm", f"c{i}.py", "cpu", ""), [], 1.0, "rmsnorm",
                       f"c{i}.py", f"{i:064x}", "x" * 20000)
        store.save(e)
        i += 1
        print(i, flush=True)
    """
)


def test_a_killed_writer_loses_no_committed_evaluation(tmp_path: Path) -> None:
    db = tmp_path / "e.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    committed = 0
    for line in proc.stdout:
        committed = int(line)
        if committed >= 40:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with ResultStore(db) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert store.count() >= committed
