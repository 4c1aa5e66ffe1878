"""Labeling goes on where a stopped run was (`nodice bench label --missing`, which
`bench/gpu/detector.sh` uses so that GPU calls resume each other): only candidates without a current
label for the device — none yet, or one made for an earlier version of the file — go to the oracle."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from nodice.bench.detector.labeling import label_pool
from nodice.bench.detector.pool import OracleLabel, load_pool
from tests.conftest import ROOT

POOL = ROOT / "bench" / "detector-heldout2"
# Two of the pool's cheapest candidates under the CPU oracle (a fraction of a second each).
UNLABELED, STALE = "gdn/chunked_for_many_tokens", "rmsnorm/except_small_batch_fallback"


def test_only_unlabeled_and_stale_candidates_go_to_the_oracle(tmp_path: Path) -> None:
    data = json.loads((POOL / "labels.json").read_text())
    cands = data["candidates"]
    del cands[UNLABELED]["labels"]["cpu"]
    cands[STALE]["labels"]["cpu"]["source_sha256"] = "0" * 64
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(data))
    before = load_pool(POOL, labels)
    assert {e.spec.key for e in before.entries if e.label("cpu") is None} == {UNLABELED, STALE}

    done: list[str] = []

    def record(key: str, lab: OracleLabel) -> None:
        done.append(key)

    after = label_pool(POOL, "cpu", labels=labels, missing=True, jobs=2, timeout_s=300, on_done=record)
    assert sorted(done) == sorted([UNLABELED, STALE])
    assert all(e.label("cpu") is not None for e in after.entries)
    # Every other candidate kept the label it had.
    kept = {e.spec.key: e.labels["cpu"].label for e in before.entries if e.spec.key not in done}
    assert kept == {e.spec.key: e.labels["cpu"].label for e in after.entries if e.spec.key not in done}
    # Again: nothing is left to label.
    done.clear()
    label_pool(POOL, "cpu", labels=labels, missing=True, on_done=record)
    assert done == []


def test_the_script_is_valid_bash() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(ROOT / "bench" / "gpu" / "detector.sh")], check=True)
