"""The local executor: N sandboxed workers on this machine, one lineage; the executor options' errors."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from nodice.evaluation.executor import ExecutorConfig, ExecutorError, LocalExecutor
from nodice.evaluation.limits import Limits
from nodice.evaluation.ray_executor import bundle_request, unpack_request
from nodice.evaluation.request import EvaluationRequest
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from tests.conftest import run_cli

BUDGET = 3


def test_evolve_with_two_local_workers_keeps_one_lineage(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ["evolve", "rmsnorm", "--run-dir", str(run_dir), "--device", "cpu", "--no-report"]
    done = run_cli(*args, "--executor", "local", "--workers", "2", "--budget", str(BUDGET))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{BUDGET} evaluations" in done.stdout

    attempts = Journal(run_dir / "results.sqlite").attempts()
    versions = Lineage(run_dir).versions()
    assert len(attempts) == BUDGET and len({a.files_sha for a in attempts}) == BUDGET
    assert {a.id for a in attempts if a.outcome == "committed"} == {v.attempt for v in versions}
    assert versions and versions[0].attempt == attempts[0].id  # the seed is v0
    assert all(b.geomean >= a.geomean for a, b in itertools.pairwise(versions))
    # The two candidates after the seed were judged at the same time, by two workers.
    (s1, e1), (s2, e2) = [(a.created - a.elapsed_s, a.created) for a in attempts[1:]]
    assert s1 < e2 and s2 < e1
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == BUDGET


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--ray-address", "127.0.0.1:1"], "--ray-address only applies with --executor ray"),
        (["--executor", "slurm"], "executor must be one of local, ray"),
    ],
)
def test_bad_executor_options_are_one_line_and_leave_no_run(
    tmp_path: Path, options: list[str], message: str
) -> None:
    run_dir = tmp_path / "run"
    done = run_cli("evolve", "rmsnorm", "--run-dir", str(run_dir), "--device", "cpu", *options, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not run_dir.exists()


def test_a_ray_address_nobody_listens_on_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    with pytest.raises(ExecutorError, match=r"cannot reach a Ray cluster at 127\.0\.0\.1:9"):
        from nodice.evaluation.ray_executor import RayExecutor

        RayExecutor("persistent", "cpu", Limits(), 1, "127.0.0.1:9")


def test_local_workers_each_get_one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    ex = LocalExecutor("persistent", "cuda", Limits(), workers=3)  # processes start on the first job
    assert [w.env for w in ex._all] == [{"CUDA_VISIBLE_DEVICES": d} for d in ("3", "5", "3")]
    assert [w.env for w in LocalExecutor("persistent", "cpu", Limits(), workers=2)._all] == [{}, {}]
    assert ExecutorConfig("local", 2).validate().workers == 2


def test_a_job_travels_with_its_folder_and_contracts(tmp_path: Path) -> None:
    folder = tmp_path / "cand"
    (folder / "sub").mkdir(parents=True)
    (folder / "kernel.py").write_text("from helper import x\n")
    (folder / "helper.py").write_text("x = 1\n")
    (folder / "sub" / "table.json").write_text("[1]")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    contract = tmp_path / "my_contract.py"
    contract.write_text("# contract\n")
    request = EvaluationRequest.create(folder / "kernel.py", "rmsnorm", seed=1, contracts=[contract])
    bundle = bundle_request(request)
    assert sorted(bundle["folder"]) == ["helper.py", "kernel.py", "sub/table.json"]

    node = tmp_path / "node"
    job, original = unpack_request(bundle, node)
    assert original == str(folder)
    assert Path(job.path) == node / "candidate" / "kernel.py"
    assert (node / "candidate" / "sub" / "table.json").read_text() == "[1]"
    assert [Path(c).read_text() for c in job.contracts] == ["# contract\n"]


def test_evaluate_many_runs_side_by_side_into_one_store(tmp_path: Path) -> None:
    from nodice.evaluation import Evaluator
    from tests.conftest import EXAMPLES

    store = tmp_path / "evals.sqlite"
    paths: list[str | Path] = [EXAMPLES / "rmsnorm" / "seed.py", EXAMPLES / "rmsnorm" / "tile_from_batch.py"]
    with Evaluator(device="cpu", store=store, executor=ExecutorConfig("local", 2)) as ev:
        assert ev.workers == 2
        got = ev.evaluate_many(paths, "rmsnorm", bench=False)
    assert [e.verdict for e in got] == ["pass", "bi_violation"]
    assert [e.candidate for e in got] == [str(p) for p in paths]
    with sqlite3.connect(store) as db:
        assert sorted(r[0] for r in db.execute("SELECT verdict FROM evaluations")) == ["bi_violation", "pass"]


def test_without_ray_installed_the_ray_executor_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from nodice.evaluation.evaluate import make_executor

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where the extra is not installed
    with pytest.raises(ExecutorError, match=r"pip install 'nodice\[ray\]'"):
        make_executor(ExecutorConfig("ray", 2), "persistent", "cpu", Limits())
