"""How a benchmark (or a check) writes a file a person named: whole or not at all, through a symlink.

A report is rewritten as its run goes on. It is written to a temporary file beside its target
and moved over it, so a write that fails (a full disk, a folder turned read-only) leaves the
previous report as it was. A symlink is followed, never replaced: its target gets the text. A
target that is not a regular file (``/dev/null``, a pipe) is written in place, never replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from nodice.errors import NodiceError


class OutputError(NodiceError):
    """An output file could not be written; the line names the option and the file."""

    kind = "cannot write"

    def line(self) -> str:
        return str(self)


def write_report(path: Path, text: str, option: str = "") -> None:
    """Write ``text`` to ``path`` (its folders made as needed); :class:`OutputError` when it cannot be."""
    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and not target.is_file():
            with target.open("w", encoding="utf-8") as f:
                f.write(text)
            return
        _replace(target, text)
    except OSError as exc:
        named = f"{option} {path}" if option else str(path)
        raise OutputError(f"{named}: cannot write it ({exc.strerror or exc})") from None


def _replace(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # left by a process of the same id that was killed mid-write
    try:
        # 0o666 less the umask, as a file written in place would get.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if target.exists():
            shutil.copymode(target, tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
