"""`bench/gpu/detector.sh` resumes across GPU calls: the candidates it sends to the oracle are those
without a current label for the device (missing, or made for an earlier version of the file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

POOL = ROOT / "bench" / "detector-heldout2"


def _todo(pool: Path, labels: Path, *extra: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu" / "detector_todo.py"), "--pool", str(pool),
         "--labels", str(labels), *extra],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's nodice, whatever is installed
    )  # fmt: skip
    return proc.stdout.split()


def test_only_unlabeled_and_stale_candidates_are_left(tmp_path: Path) -> None:
    data = json.loads((POOL / "labels.json").read_text())
    cands = data["candidates"]
    assert not any("cuda" in c["labels"] for c in cands.values())
    assert len(_todo(POOL, POOL / "labels.json", "--device", "cuda")) == len(cands)
    # Every candidate labeled on CUDA but one; another's label is for an earlier version of its file.
    for c in cands.values():
        c["labels"]["cuda"] = dict(c["labels"]["cpu"])
    del cands["moe/dense_sparse_equal"]["labels"]["cuda"]
    cands["sampling/argmax_fastpath"]["labels"]["cuda"]["source_sha256"] = "0" * 64
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(data))
    left = sorted(_todo(POOL, labels, "--device", "cuda"))
    assert left == ["moe/dense_sparse_equal", "sampling/argmax_fastpath"]
    assert _todo(POOL, labels, "--device", "cuda", "--task", "moe") == ["moe/dense_sparse_equal"]
    assert _todo(POOL, labels, "--device", "cpu") == []


def test_the_script_is_valid_bash() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(ROOT / "bench" / "gpu" / "detector.sh")], check=True)
