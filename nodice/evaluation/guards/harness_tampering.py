"""Rule ``harness-tampering``: the candidate must leave timers, torch and the harness as it found them.

Statically: assignments into torch, time, nodice and friends (``time.perf_counter
= …``, ``setattr(torch.cuda, "Event", …)``), frame walking (``sys._getframe``,
``f_back``, ``tb_frame``: the caller's locals hold the reference output), trace
hooks and signals to other processes. At run time: a snapshot of what the
harness relies on, taken before the candidate is imported and compared after
the import and after every call.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import operator
import sys
import threading
import time
import types
from typing import Any

from nodice.gate.branches import is_watch_tracer
from nodice.gate.host_lines import is_host_lines_tracer

RULE = "harness-tampering"
DESCRIPTION = "patches timers, torch or the harness, or inspects the harness's frames"

_PROTECTED_ROOTS = frozenset(
    {"torch", "time", "nodice", "triton", "tl", "builtins", "sys", "numpy", "np", "threading", "gc", "F"}
)
_INTROSPECTION = frozenset(
    {
        "_getframe",
        "currentframe",
        "f_back",
        "f_locals",
        "f_globals",
        "tb_frame",
        "settrace",
        "setprofile",
        # Reading the hooks tells a kernel when the gate watches its branches (nodice.gate.branches).
        "gettrace",
        "getprofile",
        "get_referrers",
        "get_objects",
        "stack",
    }
)
_PROCESS_CONTROL = {
    ("os", "kill"),
    ("os", "killpg"),
    ("os", "getppid"),
    ("signal", "signal"),
    ("signal", "pthread_kill"),
    ("os", "setpgid"),
}


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def static_check(tree: ast.AST) -> tuple[int, str] | None:
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and _root(t) in _PROTECTED_ROOTS:
                return t.lineno, f"assigns to {ast.unparse(t)}"
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name in ("setattr", "delattr") and node.args and _root(node.args[0]) in _PROTECTED_ROOTS:
                return node.lineno, f"{name} on {ast.unparse(node.args[0])}"
            if (
                isinstance(fn, ast.Attribute)
                and isinstance(fn.value, ast.Name)
                and (fn.value.id, fn.attr) in _PROCESS_CONTROL
            ):
                return node.lineno, f"calls {fn.value.id}.{fn.attr}"
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _INTROSPECTION
            and (node.attr != "stack" or _root(node) == "inspect")
        ):
            return node.lineno, f"inspects the interpreter's frames or hooks (.{node.attr})"
    return None


# ---- run time ----------------------------------------------------------------

# Modules whose public attributes the harness calls; only their identity is recorded.
_WATCHED_MODULES = (
    "time",
    "builtins",
    "torch",
    "torch.nn.functional",
    "torch.cuda",
    "torch.testing",
    "numpy",
    "threading",
    "triton",
    "triton.language",
)
# The part checked after every call (about a millisecond): timers, synchronisation, the tensor class.
_HOT_MODULES = ("time", "torch.cuda", "threading")
# Classes whose methods the harness calls: any added, removed or replaced entry counts.
_WATCHED_CLASSES = (
    "torch.Tensor",
    "torch.cuda.Event",
    "torch.cuda.Stream",
    "threading.Thread",
    "triton.runtime.interpreter.InterpreterBuilder",
)


def _resolve(dotted: str) -> Any:
    mod, _, attr = dotted.rpartition(".")
    module = sys.modules.get(mod)
    return getattr(module, attr, None) if module is not None else None


def _fingerprint(value: Any, depth: int = 3) -> Any:
    """Identity of callables and modules, contents of plain data (tolerances, workload shapes)."""
    if isinstance(value, (int, float, str, bytes, bool, type(None))):
        return value
    if depth == 0:
        return id(value)
    if isinstance(value, dict):
        return (id(value), tuple((repr(k), _fingerprint(v, depth - 1)) for k, v in value.items()))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return (id(value), tuple(_fingerprint(v, depth - 1) for v in items))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            id(value),
            tuple(
                (f.name, _fingerprint(getattr(value, f.name, None), depth - 1))
                for f in dataclasses.fields(value)
            ),
        )
    return id(value)


def _dynamo_disable_code() -> types.CodeType | None:
    """The code of the wrapper ``torch._disable_dynamo`` puts around a function (None without torch).

    torch wraps some of its own functions lazily: the first import of ``torch._dynamo`` (by
    ``torch.compile``, or by any torch function decorated ``_disable_dynamo`` when it first runs)
    replaces ``torch.manual_seed`` with such a wrapper of the same function. The wrapper only keeps
    dynamo from tracing into the call, so it stands for the function it wraps.
    """
    torch = sys.modules.get("torch")
    make = getattr(torch, "_disable_dynamo", None) if torch is not None else None
    if make is None:
        return None
    global _DYNAMO_DISABLE_CODE
    if _DYNAMO_DISABLE_CODE is None:
        _DYNAMO_DISABLE_CODE = make(len).__code__  # builds the wrapper only; imports nothing
    return _DYNAMO_DISABLE_CODE


_DYNAMO_DISABLE_CODE: Any = None


def _identity(value: Any, disable_code: types.CodeType | None) -> int:
    """``id`` of a module attribute, looking through torch's own dynamo-disable wrapper (nested too:
    wrapping an already wrapped function still calls the same function)."""
    names = disable_code.co_freevars if disable_code is not None else ()
    for _ in range(8):
        if disable_code is None or getattr(value, "__code__", None) is not disable_code:
            break
        # The function the wrapper calls is its closure's ``fn`` (``__wrapped__`` can be reassigned).
        cells = getattr(value, "__closure__", None) or ()
        if "fn" not in names or len(cells) != len(names):
            break
        value = cells[names.index("fn")].cell_contents
    return id(value)


def _hot_comparable(v: Any) -> bool:
    """Values whose full-snapshot record is their identity or their value (no nested fingerprint)."""
    if isinstance(v, (int, float, str, bytes, bool, type(None))):
        return True
    if isinstance(v, type(sys)) or (dataclasses.is_dataclass(v) and not isinstance(v, type)):
        return False
    return callable(v)


def _nodice_modules() -> list[tuple[str, Any]]:
    return [(n, m) for n, m in list(sys.modules.items()) if n.startswith("nodice") and m is not None]


def _nodice_entries(hot: bool) -> dict[str, Any]:
    """nodice's module globals (and, unless ``hot``, its classes' attributes and its plain data)."""
    out: dict[str, Any] = {}
    for name, module in _nodice_modules():
        if not (name == "nodice" or name.startswith("nodice.")):
            continue  # candidate modules are named nodice_candidate_*
        if hot:
            if name.startswith("nodice.gate."):
                # Functions, classes and plain values, recorded as the full snapshot records them.
                out.update(
                    (f"{name}.{attr}", _fingerprint(v, 0))
                    for attr, v in list(vars(module).items())
                    if _hot_comparable(v)
                )
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, type(sys)):
                continue  # submodules appear lazily; they are checked in their own right
            # Private dicts are caches that fill during a run: their identity, not their contents.
            key = f"{name}.{attr}"
            cache = attr.startswith("_") and isinstance(value, (dict, set))
            out[key] = id(value) if cache else _fingerprint(value)
            if isinstance(value, type) and value.__module__ == name:
                for cattr, cvalue in list(vars(value).items()):
                    if not cattr.startswith("__") or cattr in ("__call__", "__init__", "__eq__"):
                        out[f"{key}.{cattr}"] = _fingerprint(cvalue, 1)
    return out


def _trace_identity(fn: object) -> int:
    """A trace function's identity, where the harness's own tracers count as none: it installs
    them around calls it makes itself (the dynamic stage's branch watch, nodice.gate.branches;
    the benchmark's host-line record, nodice.gate.host_lines)."""
    return id(None) if is_watch_tracer(fn) or is_host_lines_tracer(fn) else id(fn)


@dataclasses.dataclass
class HarnessSnapshot:
    """What the harness trusts, by identity (and by value for plain data)."""

    entries: dict[str, Any]
    hot: bool = False

    @classmethod
    def take(cls, hot: bool = False) -> HarnessSnapshot:
        """Everything the harness trusts, or (``hot``) the part worth checking after every call."""
        entries: dict[str, Any] = {}
        disable_code = _dynamo_disable_code()
        for mod_name in _HOT_MODULES if hot else _WATCHED_MODULES:
            module = sys.modules.get(mod_name)
            if module is None:
                continue
            entries[f"sys.modules[{mod_name}]"] = id(module)
            for attr, value in list(vars(module).items()):
                # Functions and classes only: libraries update their own flags and counters as they run.
                if callable(value) and not isinstance(value, type(sys)):
                    entries[f"{mod_name}.{attr}"] = _identity(value, disable_code)
        for cls_name in _WATCHED_CLASSES:
            klass = _resolve(cls_name)
            if klass is None:
                continue
            for attr, value in list(vars(klass).items()):
                entries[f"{cls_name}.{attr}"] = id(value)
        entries.update(_nodice_entries(hot))
        entries["sys.gettrace"] = _trace_identity(sys.gettrace())
        entries["sys.getprofile"] = id(sys.getprofile())
        entries["threading._trace_hook"] = id(getattr(threading, "_trace_hook", None))
        entries["time.perf_counter"] = id(time.perf_counter)
        entries["time.process_time"] = id(time.process_time)
        entries["builtins.__import__"] = id(builtins.__import__)
        return cls(entries, hot)

    def changes(self, later: HarnessSnapshot) -> list[str]:
        """Entries replaced or removed since this snapshot (new module attributes are lazy imports)."""
        changed = []
        for key, value in self.entries.items():
            if key not in later.entries:
                # A hot snapshot covers a subset: only what it holds is compared.
                if not later.hot and not key.startswith("nodice."):
                    changed.append(f"{key} removed")
            elif later.entries[key] != value:
                changed.append(f"{key} replaced")
        for key in later.entries.keys() - self.entries.keys():
            if any(key.startswith(c + ".") for c in _WATCHED_CLASSES):
                changed.append(f"{key} added")
        return changed


# ---- the check after every call, cheap while nothing moves ------------------------------

# What one hot snapshot reads, held as the objects themselves: per container (module or class), the
# container, its attribute names and their values; then the trace hooks and timers.
_HotState = list[tuple[Any, tuple[Any, ...], tuple[Any, ...]]]


def _same_objects(live: Any, held: tuple[Any, ...]) -> bool:
    """``live`` (a dict view, iterated once) holds exactly the objects of ``held``, in its order."""
    return len(live) == len(held) and all(map(operator.is_, live, held))


class HotCheck:
    """``baseline.changes(HarnessSnapshot.take(hot=True))``, without its cost while nothing moved.

    That comparison formats a key for each of ~500 entries and walks the whole baseline (thousands
    of entries, more with every library loaded): half a millisecond or more on every kernel call,
    most of a GPU gate's dynamic stage. Here the objects a hot snapshot reads (the hot modules' and
    watched classes' attributes, the ``nodice.gate`` modules' globals, the trace hooks and timers)
    are first compared by identity with the state the full comparison last found clean. Only when
    one differs does the full comparison run, and it alone decides, so verdicts and their wording
    are unchanged.
    """

    def __init__(self, baseline: HarnessSnapshot):
        self.baseline = baseline
        # The gate's modules when the baseline was taken; one imported later has no baseline entries.
        self._gate_modules = sorted(n for n in list(sys.modules) if n.startswith("nodice.gate."))
        self._clean: _HotState | None = None
        self.full_checks = 0

    def _containers(self) -> list[Any]:
        found: list[Any] = [sys.modules.get(name) for name in _HOT_MODULES]
        found += [_resolve(name) for name in _WATCHED_CLASSES]
        found += [sys.modules.get(name) for name in self._gate_modules]
        return found

    @staticmethod
    def _hooks() -> tuple[Any, ...]:
        return (
            sys.gettrace(),
            sys.getprofile(),
            getattr(threading, "_trace_hook", None),
            time.perf_counter,
            time.process_time,
            builtins.__import__,
        )

    def _state(self) -> _HotState:
        state: _HotState = []
        for c in self._containers():
            attrs = vars(c) if c is not None else {}
            state.append((c, tuple(attrs), tuple(attrs.values())))
        state.append((None, (), self._hooks()))
        return state

    def _unchanged_since(self, state: _HotState) -> bool:
        live = [*self._containers(), None]
        if len(live) != len(state):
            return False
        for c, (held, names, values) in zip(live, state, strict=True):
            if c is not held:
                return False
            if c is not None:
                attrs = vars(c)
                if not (_same_objects(attrs, names) and _same_objects(attrs.values(), values)):
                    return False
        return _same_objects(self._hooks(), state[-1][2])

    def changes(self) -> list[str]:
        if self._clean is not None and self._unchanged_since(self._clean):
            return []
        self.full_checks += 1
        before = self._state()
        changed = self.baseline.changes(HarnessSnapshot.take(hot=True))
        # Remembered only if nothing moved while the full comparison ran.
        if not changed and self._unchanged_since(before):
            self._clean = before
        return changed
