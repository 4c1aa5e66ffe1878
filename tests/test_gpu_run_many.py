"""`bench/gpu/run_many.sh`: several measurements in one GPU call, each bounded, all packed as they go."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "bench" / "gpu" / "run_many.sh"


def test_each_measurement_gets_its_folder_limit_and_log_line_and_everything_is_packed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "BUDGET": "20", "NODICE_SITE": str(tmp_path / "site")}
    proc = subprocess.run(
        [
            "bash",
            str(SCRIPT),
            "ok=10=echo hello > $RUN/hello.txt; echo to the log",
            "slow=1=sleep 5",
            "broken=oops",
            "big=60=echo never",
            "fails=10=exit 3",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = (out / "run_many.log").read_text().splitlines()
    status = [line for line in lines if not line.startswith("==")]
    assert status[0].startswith("ok: exit 0 after")
    assert status[1].startswith("slow: exit 124 after")  # stopped at its own limit
    assert status[2] == "run_many.sh: bad measurement 'broken=oops' (NAME=SECONDS=COMMAND)"
    assert status[3].startswith("big: skipped (60 s asked,")  # more than the call's budget left
    assert status[4].startswith("fails: exit 3 after")
    assert (out / "ok" / "hello.txt").read_text() == "hello\n"
    assert (out / "ok" / "log").read_text() == "to the log\n"
    with tarfile.open(out / "results.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"./run_many.log", "./ok/hello.txt", "./ok/log", "./slow/log", "./fails/log"} <= names
    assert not any("results.tar.gz" in n for n in names)


def test_a_folder_still_being_written_is_packed_and_the_call_succeeds(tmp_path: Path) -> None:
    # A measurement's background writer outlives it: tar sees files change under it (exit 1),
    # which must still leave an archive with everything, and a zero exit status.
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "BUDGET": "20", "NODICE_SITE": str(tmp_path / "site")}
    writer = "(for i in $(seq 400); do head -c 4096 /dev/zero >> $RUN/grow; echo x > $RUN/f$i; done) &"
    proc = subprocess.run(
        ["bash", str(SCRIPT), f"bg=10={writer} sleep 0.05", "after=10=echo done > $RUN/done.txt"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out / "results.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"./run_many.log", "./bg/log", "./after/done.txt"} <= names
    assert not list(out.glob("*.tmp")) and not list(out.glob("results.tar.gz.*"))
