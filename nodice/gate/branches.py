"""Watching batch-dependent choices between algorithms while dynamic validation runs.

Static analysis reports a branch whose condition depends on the batch and whose sides run
different computations (``algorithm_selection_by_batch``). Some such branches are harmless: the
two sides compute the same bits (a dense and a sparse MoE path, an all-greedy batch answered by
``argmax``, a one-pass decode for short requests beside a split one with a fixed split size).
Static analysis cannot tell them apart from the harmful ones; running both sides can. The full
gate therefore runs dynamic validation with the branch watched: the finding is *cleared* only if
both sides ran in the dynamic contexts (the target alone and inside batches, each compared bit
for bit) and no tracked sample changed its bits. A side that never ran leaves the finding
standing: there is no evidence that the other side computes the same.

How a side is seen: during each call of the kernel, the candidate's functions that hold a watched
branch are traced by opcode (``sys.settrace`` with ``f_trace_opcodes``; every other frame is
skipped at its call event) until each watched branch has decided in that call, and
each instruction is placed by its source position (``co_positions``). After the instructions of
an ``if``'s test, the next instruction in its body means the body's side was taken, one outside
the statement means the other side. A ``try`` whose body raises for some batches: an instruction
of the handler is the handler's side; a call of the function that runs the ``try`` body and
leaves it (returning or going on past the statement) without entering the handler is the tried
side.

The watch costs a trace call per Python call while it is on, so it is installed only for a
candidate with such findings, only in the dynamic stage, only until the choices of the call are
made (the kernel's own work after them runs untraced), and no longer once both sides of every
watched branch have run.

A kernel parameter the batch chooses (``USE_MUL=B >= 16``, or ``s = a if B >= 16 else b``) that
reaches only the elements the kernel stores (``elementwise_value_from_batch``) is watched at the
kernel's launches instead: the Triton launch records the values the parameter takes, and its
"sides" are two different settings. The finding is cleared only if the kernel was launched with
two settings in the dynamic contexts and no tracked sample changed its bits.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from nodice.gate.result import Finding

# Choices between algorithms, and a dtype chosen by a branch (a conversion that may change no bits).
CONFIRMABLE_RULES = frozenset(
    {"algorithm_selection_by_batch", "precision_from_batch", "elementwise_value_from_batch"}
)

# The two sides of each kind of branch, in the words a report uses.
SIDES = {"if": ("taken", "other"), "try": ("tried", "handler"), "launch": ("first", "second")}

# The launch arguments whose values the launch watch records: scalars, as a specialisation keys them.
_SETTING_TYPES = (bool, int, float, str, type(None))


def confirmable(f: Finding) -> bool:
    """Whether the dynamic stage can settle this finding by running both sides of its branch."""
    return f.rule in CONFIRMABLE_RULES and f.severity == "violation" and bool(f.branch)


def _inside(pos: tuple[int | None, int | None, int | None, int | None], s: list[int]) -> bool:
    line, end_line, col, end_col = pos
    if line is None or end_line is None or col is None or end_col is None:
        return False
    return (line, col) >= (s[0], s[1]) and (end_line, end_col) <= (s[2], s[3])


@dataclass
class Watch:
    """One branch of one finding, and which of its sides have run."""

    finding: Finding
    path: str  # the file's real path, to tell apart functions of the same name and line
    seen: set[str] = field(default_factory=set)
    settings: set[tuple[str, str]] = field(default_factory=set)  # launch: the values seen, by type
    _tables: dict[CodeType, dict[int, str]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.branch["kind"])

    @property
    def branch(self) -> dict[str, Any]:
        assert self.finding.branch is not None
        return self.finding.branch

    def covered(self) -> bool:
        return set(SIDES[self.kind]) <= self.seen

    def launched_with(self, value: Any) -> None:
        """A launch passed ``value`` for the watched parameter: a second distinct setting is the
        other side. A value that is not a plain scalar is not counted."""
        if not isinstance(value, _SETTING_TYPES):
            return
        self.settings.add((type(value).__name__, repr(value)))
        self.seen = set(SIDES["launch"][: min(len(self.settings), 2)])

    def unseen(self) -> str:
        """What dynamic validation never ran, as a report says it."""
        if self.kind == "launch":
            b = self.branch
            got = ", ".join(sorted(v for _, v in self.settings)) or "none"
            return (
                f"dynamic validation launched {b['function']} with one setting of {b['param']} only "
                f"({got}), so nothing shows the settings agree"
            )
        sides = " and ".join(self.missing())
        return f"dynamic validation never ran its {sides} side, so nothing shows the two sides agree"

    def missing(self) -> list[str]:
        return [s for s in SIDES[self.kind] if s not in self.seen]

    def table(self, code: CodeType) -> dict[int, str]:
        """Each instruction's place in the branch: test / taken / orelse / statement (if); handler /
        tried / statement (try). "statement" is the rest of the statement: jumps, ``except`` clauses."""
        t = self._tables.get(code)
        if t is None:
            b = self.branch
            parts = (
                ("test", "taken", "orelse", "statement")
                if self.kind == "if"
                else ("handler", "tried", "statement")
            )
            t = {}
            for i, pos in enumerate(code.co_positions()):
                for part in parts:
                    if b.get(part) and _inside(pos, b[part]):
                        t[2 * i] = part
                        break
            self._tables[code] = t
        return t


class _Call:
    """One call of a watched function: follows its instructions for every watch in it."""

    def __init__(self, owner: BranchWatch, watches: list[Watch], code: CodeType):
        self.owner = owner
        self.watches = [(w, w.table(code)) for w in watches]
        self.in_test = [False] * len(watches)
        self.tried = [False] * len(watches)
        self.handled = [False] * len(watches)
        self.raised = [False] * len(watches)  # an exception left the tried body
        self.unwinding = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "opcode":
            self.unwinding = False
            at = frame.f_lasti
            for i, (w, table) in enumerate(self.watches):
                part = table.get(at)
                if w.kind == "if":
                    if part == "test":
                        self.in_test[i] = True
                    elif self.in_test[i] and part != "statement":
                        self.in_test[i] = False
                        self.owner.saw(w, "taken" if part == "taken" else "other")
                    # "statement" without being the test or the body: the jump itself; wait.
                elif part == "handler":
                    self.handled[i] = True
                    self.owner.saw(w, "handler")
                elif part == "tried":
                    self.tried[i] = True
                elif part is None:
                    if self.tried[i] and not (self.handled[i] or self.raised[i]):
                        self.owner.saw(w, "tried")  # went on past the statement without the handler
                    # Outside the statement (or in the interpreter's unwinding code): the next
                    # pass through the ``try`` starts afresh.
                    self.tried[i] = self.handled[i] = self.raised[i] = False
        elif event == "exception":
            self.unwinding = True
            for i, _ in enumerate(self.watches):
                self.raised[i] = self.raised[i] or self.tried[i]
        elif event == "return" and not self.unwinding:
            for i, (w, _) in enumerate(self.watches):
                if w.kind == "try" and self.tried[i] and not (self.handled[i] or self.raised[i]):
                    self.owner.saw(w, "tried")  # returned from inside the tried body
        return self


def is_watch_tracer(fn: object) -> bool:
    """Whether a trace function is the one :class:`BranchWatch` installs (the harness's own)."""
    return getattr(fn, "__func__", None) is BranchWatch._trace and isinstance(
        getattr(fn, "__self__", None), BranchWatch
    )


class BranchWatch:
    """The watches of one candidate's findings, and the tracer that feeds them."""

    def __init__(self, findings: list[Finding], candidate: Path):
        folder = Path(os.path.abspath(candidate)).parent
        self.watches: list[Watch] = []
        for f in findings:
            b = f.branch or {}
            shown = str(b.get("file", ""))
            target = Path(candidate) if shown == str(candidate) else folder / shown
            self.watches.append(Watch(f, os.path.realpath(str(target))))
        self._by_key: dict[tuple[str, int], list[Watch]] = {}
        self._launches: dict[tuple[str, int], list[Watch]] = {}
        for w in self.watches:
            key = (w.branch["function"], int(w.branch["first_line"]))
            (self._launches if w.kind == "launch" else self._by_key).setdefault(key, []).append(w)
        self._codes: dict[CodeType, list[Watch]] = {}
        self._undecided: set[int] = set()

    def _watches_of(self, code: CodeType) -> list[Watch]:
        hit = self._codes.get(code)
        if hit is None:
            near = self._by_key.get((code.co_name, code.co_firstlineno), [])
            real = os.path.realpath(code.co_filename) if near else ""
            hit = self._codes[code] = [w for w in near if w.path == real]
        return hit

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event != "call":
            return None
        code = frame.f_code
        if (code.co_name, code.co_firstlineno) not in self._by_key:
            return None
        watches = self._watches_of(code)
        if not watches:
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return _Call(self, watches, code)

    def saw(self, w: Watch, side: str) -> None:
        """A side ran. Once every watch has decided in this call of the kernel, tracing stops
        until the next call: what follows the choice (the kernel's work) runs at full speed."""
        w.seen.add(side)
        self._undecided.discard(id(w))
        if not self._undecided:
            sys.settrace(None)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, traced during each call until every uncovered watch's branch has decided."""

        @functools.wraps(fn)
        def watched(*args: Any, **kwargs: Any) -> Any:
            todo = self.uncovered()
            if not todo:
                return fn(*args, **kwargs)
            launches = any(w.kind == "launch" for w in todo)
            self._undecided = {id(w) for w in todo if w.kind != "launch"}
            with self._launch_hook() if launches else contextlib.nullcontext():
                if not self._undecided:
                    return fn(*args, **kwargs)
                before = sys.gettrace()
                sys.settrace(self._trace)
                try:
                    return fn(*args, **kwargs)
                finally:
                    sys.settrace(before)

        return watched

    @contextlib.contextmanager
    def _launch_hook(self) -> Iterator[None]:
        """Triton's launches, recorded for the launch watches while the call runs: ``run`` of the
        compiled and of the interpreted kernel class, whichever this process has, each restored after."""
        classes: list[type] = []
        for module, name in (
            ("triton.runtime.jit", "JITFunction"),
            ("triton.runtime.interpreter", "InterpretedFunction"),
        ):
            cls = getattr(sys.modules.get(module), name, None)
            if isinstance(cls, type) and "run" in cls.__dict__:
                classes.append(cls)
        saved = [(cls, cls.__dict__["run"]) for cls in classes]
        for cls, orig in saved:
            cls.run = self._recording(orig)  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for cls, orig in saved:
                cls.run = orig  # type: ignore[attr-defined]

    def _recording(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        watch = self

        @functools.wraps(orig)
        def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            watch._record(kernel, args, kwargs)
            return orig(kernel, *args, **kwargs)

        return run

    def _record(self, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        code = getattr(getattr(kernel, "fn", None), "__code__", None)
        if not isinstance(code, CodeType):
            return
        near = self._launches.get((code.co_name, code.co_firstlineno))
        if not near:
            return
        real = os.path.realpath(code.co_filename)
        names = list(getattr(kernel, "arg_names", None) or inspect.signature(kernel.fn).parameters)
        bound = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
        for w in near:
            if w.path != real or w.covered():
                continue
            p = str(w.branch["param"])
            if p in bound:
                w.launched_with(bound[p])
            else:  # not passed: the parameter's default, the same at every launch
                default = inspect.signature(kernel.fn).parameters.get(p)
                if default is not None and default.default is not inspect.Parameter.empty:
                    w.launched_with(default.default)

    def uncovered(self) -> list[Watch]:
        return [w for w in self.watches if not w.covered()]
