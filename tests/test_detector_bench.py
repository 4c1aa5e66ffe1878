"""The detector benchmark: its oracle's labels and the benchmark run end to end on a slice of the pool."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nodice.bench.detector.oracle import OracleConfig, label_candidate
from nodice.bench.detector.pool import default_root, load_pool
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
    # Every slot of every batch 1..4 was compared, 1 + 2 + 3 + 4, in float32 and the fp16 probe.
    assert lab.evidence["dtypes"] == ["float32", "float16"]
    assert lab.evidence["slots_compared"] == 2 * 10


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


# Small PyTorch RMSNorm kernels: fast enough to run the oracle and the whole gate in a test.
_ROW = """
def _row(r, weight, eps, parts=1):
    sq = r.float().pow(2).reshape(parts, -1).sum(-1).sum()
    return (r.float() * torch.rsqrt(sq / r.numel() + eps) * weight.float()).to(r.dtype)
"""
_TINY_POOL = {
    "row_loop": (
        "invariant",
        "none",
        "def kernel(x, weight, eps):\n    return torch.stack([_row(r, weight, eps) for r in x])",
    ),
    "empty_exit": (
        "invariant",
        "none",
        "def kernel(x, weight, eps):\n    if x.shape[0] == 0:\n        return x.clone()\n"
        "    return torch.stack([_row(r, weight, eps, 4) for r in x])",
    ),
    "fixed_parts": (
        "invariant",
        "none",
        "PARTS = 8\n\n\ndef kernel(x, weight, eps):\n"
        "    return torch.stack([_row(r, weight, eps, PARTS) for r in x])",
    ),
    "parts_from_batch": (
        "violating",
        "work_partitioning",
        "def kernel(x, weight, eps):\n    parts = 8 if x.shape[0] < 4 else 1\n"
        "    return torch.stack([_row(r, weight, eps, parts) for r in x])",
    ),
    "dot_for_one_row": (
        "violating",
        "algorithm_selection",
        "def kernel(x, weight, eps):\n    if x.shape[0] == 1:\n        r = x[0].float()\n"
        "        y = r * torch.rsqrt(torch.dot(r, r) / r.numel() + eps) * weight.float()\n"
        "        return y[None].to(x.dtype)\n"
        "    return torch.stack([_row(r, weight, eps) for r in x])",
    ),
    "parts_from_rows_helper": (
        "violating",
        "work_partitioning",
        "def _parts(rows):\n    return {1: 4, 2: 2}.get(rows, 1)\n\n\ndef kernel(x, weight, eps):\n"
        "    return torch.stack([_row(r, weight, eps, _parts(len(x))) for r in x])",
    ),
}


def _write_tiny_pool(root: Path) -> None:
    (root / "pool" / "rmsnorm").mkdir(parents=True)
    manifest = {}
    for name, (intended, mechanism, body) in _TINY_POOL.items():
        (root / "pool" / "rmsnorm" / f"{name}.py").write_text(f"import torch\n\n{_ROW}\n\n{body}\n")
        manifest[f"rmsnorm/{name}"] = {
            "task": "rmsnorm",
            "mechanism": mechanism,
            "pattern": "test",
            "intended": intended,
            "description": name,
        }
    (root / "pool" / "manifest.json").write_text(json.dumps({"candidates": manifest}))


def test_label_and_benchmark_end_to_end(tmp_path: Path) -> None:
    _write_tiny_pool(tmp_path)
    proc = run_cli("bench", "label", "--device", "cpu", "--pool", str(tmp_path), "--jobs", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pool = load_pool(tmp_path)
    for e in pool.entries:
        assert e.label("cpu") == e.spec.intended, (e.spec.key, e.labels["cpu"].reason)
        assert e.labels["cpu"].source_sha256
        # How long the oracle took for each, in the labels and in its progress lines.
        took = e.labels["cpu"].evidence["seconds"]
        assert isinstance(took, float) and took >= 0
    assert len(re.findall(r"\(\d+\.\d s\)", proc.stderr)) == len(pool.entries)

    out, md = tmp_path / "detector.json", tmp_path / "detector.md"
    proc = run_cli(
        "bench",
        "detector",
        "--device",
        "cpu",
        "--pool",
        str(tmp_path),
        "--no-warmup",
        "--jobs",
        "2",
        "--json",
        str(out),
        "--markdown",
        str(md),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["candidates_labeled"] == len(_TINY_POOL)
    runs = report["runs"]
    for mode, score in report["scores"].items():
        detected = [
            r for r in runs if r["label"] == "violating" and r["modes"][mode]["verdict"] == "bi_violation"
        ]
        rejected = [r for r in runs if r["label"] == "invariant" and r["modes"][mode]["verdict"] != "pass"]
        assert score["detected"] == len(detected) and score["false_rejections"] == len(rejected)
        assert score["violating"] == 3 and score["invariant"] == 3
        errors = [
            (r["key"], r["modes"][mode]["reason"]) for r in runs if r["modes"][mode]["verdict"] == "error"
        ]
        assert not errors and score["errors"] == 0 and score["median_ms"] > 0
    full = {r["key"] for r in runs if r["modes"]["full"]["verdict"] == "bi_violation"}
    static = {r["key"] for r in runs if r["modes"]["static"]["verdict"] == "bi_violation"}
    dynamic = {r["key"] for r in runs if r["modes"]["dynamic"]["verdict"] == "bi_violation"}
    assert static <= full and dynamic <= full  # the full gate runs both, with the same seed
    assert "full gate" in proc.stdout and "| full gate |" in md.read_text()

    # Scoring again from the saved verdicts gives the same table without running the gate.
    proc = run_cli(
        "bench",
        "detector",
        "--device",
        "cpu",
        "--pool",
        str(tmp_path),
        "--rescore",
        str(out),
        "--json",
        str(tmp_path / "again.json"),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "again.json").read_text())["scores"] == report["scores"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["detector", "--pool", "no/such/folder"], "no/such/folder"),
        (["detector", "--device", "tpu"], "tpu"),
        (
            ["detector", "--device", "cpu", "--task", "bogus"],
            "--task bogus: no candidate of the pool has that task",
        ),
        (["detector", "--device", "cpu", "--resume"], "--resume continues a --progress file"),
        (
            ["label", "--device", "cpu", "--task", "bogus", "--out", "{tmp}/l.json"],
            "--task bogus: not in the pool",
        ),
        (["label", "--device", "cpu", "--out", "{tmp}/file/labels.json"], "file is a file, not a folder"),
    ],
)
def test_benchmark_bad_input_is_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    (tmp_path / "file").write_text("x")
    proc = run_cli("bench", *(a.format(tmp=tmp_path) for a in args), timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and line in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "l.json").exists()


def test_labels_go_to_a_new_folder(tmp_path: Path) -> None:
    from nodice.bench.detector.labeling import save_atomically

    pool = load_pool(POOL)
    out = tmp_path / "new" / "folder" / "labels.json"
    save_atomically(pool, out)  # as `bench label --out` saves after every candidate
    assert json.loads(out.read_text()) == json.loads(json.dumps(pool.to_dict()))
    assert [p.name for p in out.parent.iterdir()] == ["labels.json"]  # no temporary file left


def test_unusable_labels_and_outputs_are_one_line_before_any_candidate(tmp_path: Path) -> None:
    from nodice.bench.detector.pool import PoolError, load_pool

    (tmp_path / "pool").mkdir()
    not_objects = "lack a field or are not objects"
    cases = {
        "binary.json": (b"\xf9\xd8\x00garbage", "cannot read"),
        "not_objects.json": (b'{"candidates": {"rmsnorm/a": 3}}', not_objects),
        "labels_str.json": (b'{"candidates": {"rmsnorm/a": {"labels": "x"}}}', not_objects),
    }
    for name, (body, expected) in cases.items():
        (tmp_path / name).write_bytes(body)
        with pytest.raises(PoolError, match=expected):
            load_pool(tmp_path, tmp_path / name)
    # Through the command: one line, exit 2, before anything is judged.
    for args, expected in (
        (["--labels", str(tmp_path / "binary.json")], "cannot read"),
        (["--progress", str(tmp_path)], f"--progress {tmp_path} is a folder"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
    ):
        proc = run_cli("bench", "detector", "--pool", str(tmp_path), "--device", "cpu", *args, timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and expected in lines[0], proc.stderr


def test_manifest_may_list_its_candidates(tmp_path: Path) -> None:
    from nodice.bench.detector.pool import PoolError, load_manifest

    (tmp_path / "pool").mkdir()
    item = {"task": "rmsnorm", "mechanism": "none", "pattern": "grid", "intended": "invariant"}
    manifest = tmp_path / "pool" / "manifest.json"
    manifest.write_text(json.dumps({"candidates": [{"key": "rmsnorm/a", **item}]}))
    (spec,) = load_manifest(tmp_path)
    assert spec.key == "rmsnorm/a" and spec.intended == "invariant" and spec.split == "main"
    manifest.write_text(json.dumps({"candidates": [item]}))
    with pytest.raises(PoolError, match="lacks a field"):
        load_manifest(tmp_path)


def _progress_file(path: Path, key: str = "rmsnorm/a", label: str = "violating") -> str:
    """A ``--progress`` file of an earlier run: its provenance line, then one candidate's verdicts."""
    modes = {m: {"verdict": "bi_violation", "ms": 1.0} for m in ("static", "dynamic", "full")}
    run = {"key": key, "task": key.split("/")[0], "mechanism": "m", "pattern": "p", "label": label}
    text = (
        json.dumps({"date": "earlier", "machine": "m", "versions": {}, "seed": 0})
        + "\n"
        + json.dumps({**run, "modes": modes})
        + "\n"
    )
    path.write_text(text)
    return text


def test_a_progress_file_that_holds_results_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "pool").mkdir()
    labels = tmp_path / "labels.json"
    labels.write_text('{"candidates": {}}\n')
    progress = tmp_path / "progress.jsonl"
    earlier = _progress_file(progress)
    base = ("bench", "detector", "--device", "cpu", "--pool", str(tmp_path))
    for args, expected in (
        # Without --resume, a file with results in it is refused (a fresh run would start it anew).
        (["--progress", str(progress)], f"--progress {progress} already holds results: add --resume"),
        # An input is never the progress file, with --resume or without.
        (["--progress", str(labels), "--resume"], f"--progress {labels} is the same file as --labels"),
        (["--rescore", str(progress), "--progress", str(progress), "--resume"], "same file as --rescore"),
    ):
        proc = run_cli(*base, *args, timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and expected in lines[0], proc.stderr
        assert progress.read_text() == earlier and labels.read_text() == '{"candidates": {}}\n'
    # With --resume the file is continued: its results are kept (this pool has nothing left to run).
    proc = run_cli(*base, "--progress", str(progress), "--resume", timeout=60)
    assert "resuming: 1 candidate(s) already in" in proc.stderr and "Traceback" not in proc.stderr
    assert progress.read_text() == earlier


def test_reports_are_written_through_symlinks_and_unwritable_ones_are_one_line(tmp_path: Path) -> None:
    labeled = next(e for e in load_pool(POOL).entries if e.label("cpu") in ("violating", "invariant"))
    progress = tmp_path / "progress.jsonl"
    _progress_file(progress, labeled.spec.key, str(labeled.label("cpu")))
    real, link, md = tmp_path / "real.json", tmp_path / "link.json", tmp_path / "report.md"
    real.write_text("an earlier report\n")
    link.symlink_to(real)
    rescore = ("bench", "detector", "--device", "cpu", "--rescore", str(progress))
    proc = run_cli(*rescore, "--json", str(link), "--markdown", str(md), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert link.is_symlink() and json.loads(real.read_text())["candidates_labeled"] == 1
    if Path("/dev/full").exists():  # a device that refuses every write: one line, not a traceback
        proc = run_cli(*rescore, "--json", str(md), "--markdown", "/dev/full", timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and lines == [
            "--markdown /dev/full: cannot write it (No space left on device)"
        ]
    # A progress file whose provenance line is lost (no versions, no timing) is still rescored.
    progress.write_text(progress.read_text().splitlines()[1] + "\n")
    proc = run_cli(*rescore, "--markdown", str(md), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and md.read_text().strip()
