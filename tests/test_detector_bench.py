"""The detector benchmark: its oracle's labels and the benchmark run end to end on a slice of the pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodice.bench.oracle import OracleConfig, label_candidate
from nodice.bench.pool import default_root, load_pool
from tests.conftest import run_cli

POOL = default_root()
# A short sweep: enough batch sizes and samples for these two candidates' verdicts.
SMALL = OracleConfig(
    max_batch=4,
    extra_batches=(),
    seeds=1,
    repeats=2,
    batch_repeats=1,
    samples_per_seed=8,
    correctness_seeds=1,
)


def test_oracle_labels_a_batch_dependent_split_violating() -> None:
    lab = label_candidate(POOL / "pool/rmsnorm/split_count_from_batch.py", "rmsnorm", "cpu", config=SMALL)
    assert lab.label == "violating", lab.reason
    first = lab.evidence["first_difference"]
    assert first["batch_size"] > 1 and first["kind"] == "batch"
    assert lab.evidence["violating_batch_sizes"]


def test_oracle_labels_a_fixed_tile_kernel_invariant() -> None:
    lab = label_candidate(POOL / "pool/rmsnorm/batch_in_grid.py", "rmsnorm", "cpu", config=SMALL)
    assert lab.label == "invariant", lab.reason
    # Every slot of every batch 1..4 was compared: 1 + 2 + 3 + 4.
    assert lab.evidence["slots_compared"] == 10


def test_oracle_excludes_an_incorrect_kernel(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def kernel(x, weight, eps):\n    return x * weight\n")
    lab = label_candidate(wrong, "rmsnorm", "cpu", config=SMALL)
    assert lab.label == "excluded" and lab.reason.startswith("incorrect")


def test_oracle_excludes_what_the_device_cannot_show() -> None:
    # Float atomics run one program at a time under the interpreter: no difference is no evidence.
    lab = label_candidate(
        POOL / "pool/rmsnorm/atomic_partial_sums.py", "rmsnorm", "cpu", ("cuda",), config=SMALL
    )
    assert lab.label == "excluded" and "cannot act" in lab.reason


def test_pool_is_labeled_and_covers_every_family_and_mechanism() -> None:
    pool = load_pool(POOL)
    from nodice.tasks import available

    assert {e.spec.task for e in pool.entries} >= set(available())
    cpu = [e for e in pool.entries if e.label("cpu") in ("violating", "invariant")]
    assert len(pool.entries) >= 120
    assert sum(e.spec.intended == "violating" for e in pool.entries) * 2 >= len(pool.entries)
    mechanisms = {e.spec.mechanism for e in pool.entries}
    assert mechanisms >= {
        "work_partitioning",
        "reduction_order",
        "algorithm_selection",
        "expert_routing",
        "rng",
        "atomics",
        "autotune",
        "none",
    }
    assert cpu, "no candidate has a CPU label"


def test_benchmark_end_to_end_on_eight_candidates(tmp_path: Path) -> None:
    out = tmp_path / "detector.json"
    proc = run_cli(
        "bench",
        "detector",
        "--device",
        "cpu",
        "--task",
        "rmsnorm",
        "--limit",
        "8",
        "--no-warmup",
        "--json",
        str(out),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["candidates_labeled"] == 8
    runs = report["runs"]
    assert {r["label"] for r in runs} == {"violating", "invariant"}
    for mode, score in report["scores"].items():
        detected = [
            r for r in runs if r["label"] == "violating" and r["modes"][mode]["verdict"] == "bi_violation"
        ]
        rejected = [r for r in runs if r["label"] == "invariant" and r["modes"][mode]["verdict"] != "pass"]
        assert score["detected"] == len(detected) and score["false_rejections"] == len(rejected)
        assert score["errors"] == 0
        assert score["median_ms"] > 0
    full = {r["key"] for r in runs if r["modes"]["full"]["verdict"] == "bi_violation"}
    static = {r["key"] for r in runs if r["modes"]["static"]["verdict"] == "bi_violation"}
    assert static <= full  # the full gate runs static analysis first
    assert "full gate" in proc.stdout and "detection" in proc.stdout


@pytest.mark.parametrize("args", [["--pool", "no/such/folder"], ["--device", "tpu"]])
def test_benchmark_bad_input_is_one_line(args: list[str]) -> None:
    proc = run_cli("bench", "detector", *args, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
