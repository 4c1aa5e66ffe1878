"""Evaluations on a real local Ray cluster (CPU only, 2 slots), started once for these tests.

The lineage rules hold with two evaluations in flight, a driver killed mid-run resumes, and a Ray
worker killed mid-evaluation costs one retry (twice: one ``error`` evaluation), never the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nodice.evaluation import Evaluator
from nodice.evaluation.executor import ExecutorConfig
from nodice.evaluation.forkserver import ADDRESS_VARIABLE
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from tests.conftest import EXAMPLES, ROOT, run_cli
from tests.evolution_helpers import shared_folder

ray = pytest.importorskip("ray")  # the --dev install has it: CI runs these

BUDGET = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    """Running (a zombie whose parent is another xdist worker counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _without(env: Mapping[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != name}


def _start_head() -> dict[str, object]:
    """``ray start --head --block`` with 2 CPUs and no GPU, in its own session; its pid, address, folder."""
    port = _free_port()
    # Short: Ray's socket paths live under it and must fit in 107 characters.
    temp = tempfile.mkdtemp(prefix="ndray")
    ray_bin = Path(sys.executable).with_name("ray")
    proc = subprocess.Popen(
        [
            *(str(ray_bin), "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--num-gpus=0"),
            *("--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        # The cluster's processes are other nodes' in spirit: they fork their own workers, and
        # the Ray tests find a sandbox's host as its worker's parent (or its own server's).
        env={**_without(os.environ, ADDRESS_VARIABLE), "RAY_USAGE_STATS_ENABLED": "0"},
    )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        probe = subprocess.run(
            [str(ray_bin), "status", f"--address={address}"], capture_output=True, text=True
        )
        if probe.returncode == 0 and "CPU" in probe.stdout:
            return {"pid": proc.pid, "address": address, "temp": temp}
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop_head({"pid": proc.pid, "temp": temp})
            raise AssertionError("the Ray head did not start")
        time.sleep(0.5)


def _stop_head(info: dict[str, object]) -> None:
    # The whole cluster is this one process group (its own session): nothing else is touched.
    pid = int(str(info["pid"]))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    shutil.rmtree(str(info["temp"]), ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of one local cluster shared by every xdist worker of the session that asks.

    The first to ask starts it; each user signs in under a file lock; the last to leave stops it.
    """
    # A loopback cluster of the test's own, without Ray's token authentication: its token file is
    # shared by every cluster this user starts, so another one started meanwhile would lock us out.
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # for the head, the CLI drivers and this process's driver
    folder = shared_folder(tmp_path_factory)
    state, users = folder / "ray-cluster.json", folder / "ray-cluster-users"
    me = users / os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / "ray-cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        info = json.loads(state.read_text()) if state.exists() else None
        if info is None or not _alive(int(info["pid"])):
            info = _start_head()
            state.write_text(json.dumps(info))
        users.mkdir(exist_ok=True)
        me.touch()
    try:
        yield str(info["address"])
    finally:
        with open(folder / "ray-cluster.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            me.unlink(missing_ok=True)
            if not any(users.iterdir()):
                _stop_head(info)
                state.unlink(missing_ok=True)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def _evolve(run_dir: Path, address: str) -> list[str]:
    return [
        *(sys.executable, "-m", "nodice", "evolve", "rmsnorm", "--run-dir", str(run_dir)),
        "--device",
        "cpu",
        "--executor",
        "ray",
        "--ray-address",
        address,
        "--workers",
        "2",
        "--budget",
        str(BUDGET),
        "--no-report",
    ]


def _attempts(store: Path) -> list[tuple[int, str, str]]:
    if not store.exists():
        return []
    try:
        with sqlite3.connect(store, timeout=5) as db:
            return db.execute("SELECT id, outcome, files_sha FROM evolution_attempts ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []


def test_evolve_on_ray_keeps_one_lineage_and_resumes_after_a_driver_kill(
    cluster: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    store = run_dir / "results.sqlite"
    proc = subprocess.Popen(
        _evolve(run_dir, cluster),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 150
        while not _attempts(store) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, mid-run: the seed is in, a batch is in flight
    finally:
        proc.wait(10)
    before = _attempts(store)
    assert 1 <= len(before) < BUDGET, "the driver was not killed mid-run"

    again = subprocess.run(_evolve(run_dir, cluster), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming the run" in again.stdout

    after = _attempts(store)
    finished = {"committing": "committed"}
    assert after[: len(before)] == [(i, finished.get(o, o), sha) for i, o, sha in before]
    assert len(after) == BUDGET
    assert len({sha for _, _, sha in after}) == BUDGET  # no source judged twice, across the kill too

    # One lineage: every commit is a version in git, each at least as fast as the one before.
    versions = Lineage(run_dir).versions()
    journal = Journal(store)
    attempts = journal.attempts()
    assert {a.id for a in attempts if a.outcome == "committed"} == {v.attempt for v in versions}
    assert [v.version for v in versions] == list(range(len(versions)))
    assert all(b.geomean >= a.geomean for a, b in itertools.pairwise(versions))
    assert not any(a.outcome in ("committing", "eligible") for a in attempts)

    # Every evaluation ran on the cluster and is in the one store; two of them were in flight at once.
    with sqlite3.connect(store) as db:
        envs = [json.loads(r[0]) for r in db.execute("SELECT environment_json FROM evaluations")]
    assert len(envs) >= BUDGET and all(e.get("ray_node") for e in envs)
    spans = [(a.created - a.elapsed_s, a.created) for a in attempts if a.label != "seed"]
    assert any(s1 < e2 and s2 < e1 for i, (s1, e1) in enumerate(spans) for s2, e2 in spans[i + 1 :])


def _candidate(folder: Path, marker: Path, hold_every_time: bool) -> Path:
    """The rmsnorm seed, whose import writes its process id to ``marker`` and holds on (once or always)."""
    seed = (EXAMPLES / "rmsnorm" / "seed.py").read_text()
    hold = f"with open({str(marker)!r}, 'a') as f:\n    f.write(f'{{os.getpid()}}\\n')\ntime.sleep(30)\n"
    if not hold_every_time:
        indented = "".join(f"    {ln}\n" for ln in hold.splitlines())
        hold = f"if not os.path.exists({str(marker)!r}):\n" + indented
    path = folder / "kernel.py"
    folder.mkdir()
    path.write_text("import os, time\n" + hold + seed)
    return path


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _host(pid: int) -> int:
    """The Ray worker process a sandbox runs under: its parent, or its fork server's parent."""
    parent = _parent(pid)
    if b"nodice.evaluation.forkserver" in Path(f"/proc/{parent}/cmdline").read_bytes():
        return _parent(parent)
    return parent


def _kill_hosts(marker: Path, times: int) -> threading.Thread:
    """Kill the Ray worker process hosting each sandbox that writes ``marker``, ``times`` times."""

    def killer() -> None:
        killed: set[int] = set()
        deadline = time.monotonic() + 120
        while len(killed) < times and time.monotonic() < deadline:
            pids = [int(x) for x in marker.read_text().split()] if marker.exists() else []
            for pid in pids:
                if pid not in killed:
                    with contextlib.suppress(OSError, IndexError, ValueError):
                        os.kill(_host(pid), signal.SIGKILL)  # the actor: a Ray worker of our own cluster
                    killed.add(pid)
            time.sleep(0.1)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


def test_a_worker_killed_mid_evaluation_costs_one_retry_never_the_run(cluster: str, tmp_path: Path) -> None:
    store = tmp_path / "evals.sqlite"
    config = ExecutorConfig("ray", 1, cluster)
    # The kills land at the candidate's import: the gate's dynamic stage and the benchmark, which come
    # later, would only add seconds of interpreter time to each evaluation that completes.
    light = {"bench": False, "dynamic": False}
    with Evaluator(device="cpu", isolation="persistent", store=store, executor=config) as ev:
        marker = tmp_path / "once.pids"
        killer = _kill_hosts(marker, 1)
        once = ev.evaluate(_candidate(tmp_path / "once", marker, False), "rmsnorm", **light)
        killer.join()
        assert len(marker.read_text().split()) == 1  # the first try was killed mid-evaluation
        assert once.verdict == "pass", once.check.reason
        assert once.timings.get("ray_retries") == 1
        assert "Ray worker lost, evaluation retried" in once.log

        marker = tmp_path / "always.pids"
        killer = _kill_hosts(marker, 2)
        always = ev.evaluate(_candidate(tmp_path / "always", marker, True), "rmsnorm", **light)
        killer.join()
        assert always.verdict == "error"
        assert always.check.reason.startswith("worker failed twice on the Ray cluster"), always.check.reason

        # The executor goes on with a fresh worker.
        seed = ev.evaluate(EXAMPLES / "rmsnorm" / "seed.py", "rmsnorm", **light)
        assert seed.verdict == "pass" and "ray_retries" not in seed.timings
    with sqlite3.connect(store) as db:
        verdicts = [r[0] for r in db.execute("SELECT verdict FROM evaluations ORDER BY id")]
    assert verdicts == ["pass", "error", "pass"]


def test_detector_benchmark_spreads_its_candidates_over_the_cluster(cluster: str, tmp_path: Path) -> None:
    from nodice.bench.detector.pool import OracleLabel, Pool, PoolEntry, load_manifest, source_digest
    from tests.test_detector_bench import _write_tiny_pool

    _write_tiny_pool(tmp_path)
    # Two candidates, labeled as the oracle labels them on CPU (test_detector_bench checks that): the
    # verdicts below come from the real gate on the cluster.
    keep = {"rmsnorm/row_loop": "invariant", "rmsnorm/parts_from_batch": "violating"}
    entries = []
    for spec in load_manifest(tmp_path):
        if spec.key in keep:
            digest = source_digest(tmp_path / "pool" / f"{spec.key}.py")
            labels = {"cpu": OracleLabel(keep[spec.key], "test", source_sha256=digest)}  # type: ignore[arg-type]
            entries.append(PoolEntry(spec, "norm", labels))
    Pool(tmp_path, entries).save()

    out = tmp_path / "detector.json"
    args = ["--device", "cpu", "--pool", str(tmp_path), "--no-warmup", "--json", str(out)]
    proc = run_cli("bench", "detector", *args, "--executor", "ray", "--ray-address", cluster, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["candidates_labeled"] == 2
    verdicts = {r["key"]: r["modes"]["full"]["verdict"] for r in report["runs"]}
    assert verdicts == {"rmsnorm/row_loop": "pass", "rmsnorm/parts_from_batch": "bi_violation"}
    assert all(r["modes"][m]["verdict"] != "error" for r in report["runs"] for m in r["modes"])


def test_a_cuda_run_on_a_cluster_without_gpus_is_one_line(cluster: str, tmp_path: Path) -> None:
    # The driver has no GPU either: with --executor ray, the device is the cluster's business.
    args = ["evolve", "rmsnorm", "--run-dir", str(tmp_path / "run"), "--device", "cuda", "--budget", "1"]
    proc = run_cli(*args, "--executor", "ray", "--ray-address", cluster, "--no-report", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "executor unavailable: the Ray cluster has no GPU for a cuda evaluation"


def test_a_slot_the_cluster_cannot_place_is_a_loss_not_a_hang(cluster: str, tmp_path: Path) -> None:
    from nodice.evaluation.ray_executor import NodeWorker
    from nodice.evaluation.ray_slots import RaySlots

    slots = RaySlots(NodeWorker, ("persistent", "cpu", None, None), "cpu", 1, cluster)
    try:
        slots.start_timeout_s = 2.0
        # As after a node died with its GPUs: the slot's next actor needs what no node has any more.
        slots._actor_class = ray.remote(num_cpus=1, resources={"node_gone": 1})(NodeWorker)
        t0 = time.monotonic()
        reply, lost = slots.call("where")
        assert reply is None and len(lost) == 2 and all("GetTimeoutError" in x for x in lost), lost
        assert time.monotonic() - t0 < 30
    finally:
        slots.close()


def _shape(value: object) -> object:
    """A JSON value's structure: its keys, recursively (list items by their first)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


def test_kernel_benchmark_on_the_cluster_writes_the_local_report(
    cluster: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.test_bench_kernels import unwarmed_rmsnorm_report

    args = ["bench", "kernels", "--device", "cpu", "--task", "rmsnorm"]
    with ThreadPoolExecutor(1) as pool:  # the cluster's run, beside the local one
        on_cluster = ("--json", str(tmp_path / "ray.json"), "--executor", "ray", "--ray-address", cluster)
        ray_run = pool.submit(run_cli, *args, *on_cluster)
        # The same local run as test_bench_kernels's without warm-up (the cluster skips the warm-up too).
        local_report = unwarmed_rmsnorm_report(tmp_path_factory)
        on_ray = ray_run.result()
    assert on_ray.returncode == 0, on_ray.stderr[-2000:]
    ray_report = json.loads((tmp_path / "ray.json").read_text())

    assert (ray_report["executor"], local_report["executor"]) == ("ray", "local")
    ray_entry, local_entry = ray_report["tasks"]["rmsnorm"], local_report["tasks"]["rmsnorm"]
    # Measured by a Ray worker of the cluster, with the ceilings measured on one of its slots.
    assert ray_entry["node"] and local_entry["node"] is None and ray_report["limits"]["copy_gbps"] > 0
    assert ray_entry["verdict"] == local_entry["verdict"] == "pass"
    assert ray_entry["baselines_bi"] == local_entry["baselines_bi"]
    # The same structure (SPEC §6 and the rest), but for the timings each run happened to record.
    for report in (ray_report, local_report):
        report["tasks"]["rmsnorm"].pop("timings_ms")
        report["tasks"]["rmsnorm"].pop("node")
    assert _shape(ray_report) == _shape(local_report)
