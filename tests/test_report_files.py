"""Report files a person named: written whole or not at all, through a symlink, and refused up front
when two outputs name one file or an output is an input."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from nodice.bench.output import OutputError, write_report
from nodice.cli.common import output_problem, outputs_problem
from nodice.errors import NodiceError


def test_a_report_is_written_through_a_symlink_and_keeps_its_mode(tmp_path: Path) -> None:
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old\n")
    real.chmod(0o640)
    link.symlink_to(real)
    write_report(link, "new\n", "--json")
    assert link.is_symlink() and real.read_text() == "new\n"
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]  # no temporary left


def test_a_failed_write_keeps_the_earlier_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "report.json"
    report.write_text("an earlier report\n")

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("nodice.bench.output.os.replace", full)
    with pytest.raises(OutputError) as caught:
        write_report(report, "the new report\n", "--json")
    assert caught.value.line() == f"--json {report}: cannot write it ({os.strerror(errno.ENOSPC)})"
    assert report.read_text() == "an earlier report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_the_kernel_benchmark_report_that_cannot_be_written_is_an_error_line() -> None:
    from nodice.bench.kernels import _write

    with pytest.raises(NodiceError) as caught:  # the command turns it into one line and exit 2
        _write(Path("/dev/full"), {"tasks": {}})
    assert caught.value.line() == "--json /dev/full: cannot write it (No space left on device)"
    assert Path("/dev/full").exists() and not Path("/dev/full").is_file()  # written in place, not replaced


def test_outputs_on_one_file_or_on_an_input_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text("{}")
    (tmp_path / "hard.json").hardlink_to(data)
    out = tmp_path / "out.json"
    assert outputs_problem([("--json", out), ("--markdown", tmp_path / "out.md")], [("--labels", data)]) == ""
    assert outputs_problem([("--json", out), ("--markdown", tmp_path / "x" / ".." / "out.json")]) == (
        f"--json and --markdown name one file ({out}): give each output its own"
    )
    assert "is the same file as --labels" in outputs_problem(
        [("--json", out), ("--progress", tmp_path / "hard.json")], [("--labels", data)]
    )
    assert outputs_problem([("--json", None), ("--markdown", None)], [("--labels", None)]) == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_a_read_only_folder_is_refused_up_front(tmp_path: Path) -> None:
    folder = tmp_path / "read_only"
    folder.mkdir()
    (folder / "report.json").write_text("an earlier report\n")
    folder.chmod(0o555)
    try:
        assert "is not writable" in output_problem("--json", folder / "report.json")
        assert "is not writable" in output_problem("--json", folder / "new" / "report.json")
    finally:
        folder.chmod(0o755)
