"""Which host lines of a candidate file a kernel call runs.

A kernel file often holds more than one path: a Hopper path and a portable fallback, a CUDA
path and an interpreter path, a table per head dim. A parameter on a line the call never runs
cannot change what the benchmark measures, and a search that steps it spends evaluations on
noise. The benchmark records, for each workload, the lines of the candidate's own file that its
checked call ran (outside Triton/Gluon device functions, whose bodies are compiled, not run as
Python, on a GPU); the built-in agent steps only parameters those lines can reach.

The tracer (``sys.settrace``) looks at the call event of every Python frame and line-traces only
frames of the candidate file, so the rest of the call (torch, Triton's launcher) pays one cheap
check per Python call. It is installed by the harness around one call it makes itself, outside
the timed calls, and the guards count it as no tracer (``is_host_lines_tracer``).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from nodice.gate.static.triton_kernels import is_jit


def device_function_lines(source: str) -> set[int]:
    """First lines (decorators and ``def``) of the functions a Triton/Gluon JIT decorates."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and is_jit(node):
            out.add(node.lineno)
            out.update(d.lineno for d in node.decorator_list)
    return out


class HostLines:
    """The lines of one file run while :meth:`tracing` is on (device functions left out)."""

    def __init__(self, path: str | Path):
        self.path = os.path.realpath(path)
        self.lines: set[int] = set()
        try:
            source = Path(self.path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = ""
        self._device = device_function_lines(source)
        self._ours: dict[str, bool] = {}

    def _is_ours(self, filename: str) -> bool:
        hit = self._ours.get(filename)
        if hit is None:
            hit = self._ours[filename] = os.path.realpath(filename) == self.path
        return hit

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event != "call":
            return None
        code = frame.f_code
        if not self._is_ours(code.co_filename) or code.co_firstlineno in self._device:
            return None
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._line

    @contextmanager
    def tracing(self) -> Iterator[HostLines]:
        before = sys.gettrace()
        sys.settrace(self._trace)
        try:
            yield self
        finally:
            sys.settrace(before)


def is_host_lines_tracer(fn: object) -> bool:
    """Whether a trace function is the one :class:`HostLines` installs (the harness's own)."""
    return getattr(fn, "__func__", None) is HostLines._trace and isinstance(
        getattr(fn, "__self__", None), HostLines
    )
