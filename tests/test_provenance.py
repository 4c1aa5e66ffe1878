"""The commit a benchmark names: the checkout's, marked when its tracked files were changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nodice.measuring.provenance import _git_commit


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def test_a_changed_checkout_is_not_called_its_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODICE_COMMIT", raising=False)
    _git(tmp_path, "init", "-q")
    (tmp_path / "kernel.py").write_text("x = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD").strip()
    (tmp_path / "notes.txt").write_text("untracked files do not count\n")
    assert _git_commit(tmp_path) == head
    (tmp_path / "kernel.py").write_text("x = 2\n")
    assert _git_commit(tmp_path) == f"{head}+changes"
    monkeypatch.setenv("NODICE_COMMIT", "abc1234")
    assert _git_commit(tmp_path) == "abc1234"
