"""Workers and the Evaluator's interface: isolation modes, limits, the CLI's --bench and --store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nodice.evaluation import Evaluator
from nodice.evaluation.limits import clean_environment, default_memory_mb
from nodice.evaluation.store import ResultStore
from tests.conftest import run_cli

HOSTILE = Path(__file__).parent / "adversarial"


def test_evaluator_rejects_unknown_modes() -> None:
    with pytest.raises(ValueError, match="isolation"):
        Evaluator(isolation="threads")
    with pytest.raises(ValueError, match="device"):
        Evaluator(device="tpu")


def test_clean_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/triton")
    env = clean_environment(tmp_path)
    assert "OPENAI_API_KEY" not in env and env["TRITON_CACHE_DIR"] == "/tmp/triton"
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path) and "PATH" in env
    assert default_memory_mb() > 0


def test_isolated_worker_survives_a_hang_at_import(tmp_path: Path) -> None:
    store = tmp_path / "isolated.sqlite"
    with Evaluator(device="cpu", isolation="isolated", timeout_s=5, store=store) as ev:
        hung = ev.evaluate(HOSTILE / "hang_at_import.py", "rmsnorm", seed=1)
        missing = ev.evaluate(tmp_path / "nowhere.py", "rmsnorm", seed=1)
    assert hung.verdict == "error" and "timed out" in hung.check.reason
    assert hung.timings["worker_start"] > 0 and hung.environment["torch"]
    assert missing.verdict == "error" and "no such file" in missing.check.reason
    with ResultStore(store) as s:
        assert s.count() == 2


def test_check_cli_benchmarks_and_stores(tmp_path: Path) -> None:
    store = tmp_path / "cli.sqlite"
    args = ["check", str(HOSTILE / "control_honest.py"), "--task", "rmsnorm", "--device", "cpu"]
    r = run_cli(*args, "--bench", "--store", str(store), "--json", "--seed", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "pass" and out["geomean"] > 0
    assert [s["workload"] for s in out["scores"]] == ["cpu-small", "cpu-wide"]
    assert "bench" in out["stages"] and "guards" in out["stages"]
    with ResultStore(store) as s:
        (e,) = list(s.evaluations())
    assert e.verdict == "pass" and e.scores and e.source.startswith('"""Control')


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_check_on_a_missing_cuda_device_says_so_in_one_line() -> None:
    """The worker cannot start on the device: the reason, not only that it exited, reaches the user."""
    args = ["check", str(HOSTILE / "control_honest.py"), "--task", "rmsnorm", "--device", "cuda"]
    r = run_cli(*args)
    assert r.returncode == 2
    assert "no CUDA device is visible" in r.stderr and "Traceback" not in r.stderr + r.stdout
    # the cause alone: neither the worker's exit nor a crash of the candidate
    line = "device unavailable: cuda requested but no CUDA device is visible"
    assert r.stderr.strip().splitlines() == [line]
    r = run_cli(*args, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["verdict"] == "error"
    assert "device unavailable: cuda requested but no CUDA device is visible" in out["reason"]
