"""Load a candidate file and find its entry point, turning every failure into one typed error."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.errors import CandidateLoadError, EntryPointError, interrupts_are_raised

if TYPE_CHECKING:
    import torch

    from nodice.tasks.base import Task


@dataclass
class Candidate:
    path: Path
    entry: str
    fn: Callable[..., Any]
    source: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


def read_source(path: Path) -> str:
    if not path.exists():
        raise CandidateLoadError(f"no such file: {path}")
    if not path.is_file():
        raise CandidateLoadError(f"not a file: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CandidateLoadError(f"cannot read {path}: {exc}") from None


def _compile(source: str, p: Path) -> None:
    try:
        compile(source, str(p), "exec")
    except SyntaxError as exc:
        # Python names no line for some errors (a NUL byte): find it in the source.
        line = exc.lineno if exc.lineno is not None else _nul_line(source)
        where = f"{p.name}:{line}" if line is not None else p.name
        raise CandidateLoadError(f"syntax error in {where}: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes (before Python 3.12)
        line = _nul_line(source)
        where = f"{p.name}:{line}" if line is not None else p.name
        raise CandidateLoadError(f"cannot compile {where}: {exc}") from None


def _nul_line(source: str) -> int | None:
    at = source.find("\0")
    return source.count("\n", 0, at) + 1 if at >= 0 else None


# Ways a module can bind a name that its top-level statements do not show.
_DYNAMIC_BINDING = ("globals()", "setattr(", "exec(", "__dict__", "import *", "__getattr__", "global ")


def _stores(node: ast.AST, name: str) -> bool:
    """Whether ``node`` stores ``name`` in its own scope (not inside a function, class or lambda)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
        todo.extend(
            c
            for c in ast.iter_child_nodes(n)
            if not isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
        )
    return False


def _binds_at_top_level(tree: ast.Module, name: str) -> bool:
    """Whether a statement that runs at module level (inside ``if``/``try``/``with``/loops too) binds
    ``name``: a def, a class, an assignment target or an import."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        else:
            inner = ast.Module(body=_nested(node), type_ignores=[])
            if _stores(node, name) or _binds_at_top_level(inner, name):
                return True
    return False


def _nested(node: ast.stmt) -> list[ast.stmt]:
    """The statements a compound statement runs in the same scope (its bodies and handlers)."""
    out: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody"):
        out += [x for x in getattr(node, field, []) if isinstance(x, ast.stmt)]
    for handler in getattr(node, "handlers", []):
        out += handler.body
    for case in getattr(node, "cases", []):
        out += case.body
    return out


def check_source(path: str | Path, entry: str) -> str:
    """Read a candidate without running it: a file that does not parse, or one that never binds its
    entry point at module level, is refused before any stage (``--static-only`` runs no import).
    Returns the source."""
    p = Path(path).resolve()
    source = read_source(p)
    _compile(source, p)
    dynamic = any(marker in source for marker in _DYNAMIC_BINDING)
    tree = ast.parse(source)
    if not dynamic and not _binds_at_top_level(tree, entry):
        raise EntryPointError(f"{p.name} defines no '{entry}'")
    if not dynamic and _literal_only(tree, entry):
        raise EntryPointError(f"'{entry}' in {p.name} is not callable")
    return source


def _binding_of(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds ``name`` (a def, a class, an import or a store)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name == name
    if isinstance(node, ast.Import | ast.ImportFrom):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)


def _literal_only(tree: ast.Module, name: str) -> bool:
    """Whether every binding of ``name`` anywhere in the file is ``name = <literal>`` (a number, a
    string, None): an entry point no call can run."""
    bindings = [node for node in ast.walk(tree) if _binding_of(node, name)]
    if not bindings or not all(isinstance(b, ast.Name) for b in bindings):
        return False
    stores = {id(b) for b in bindings}
    assigned = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(id(t) in stores for t in node.targets)
    ]
    # Every store is a plain assignment of a literal (not a tuple target, a loop variable, a walrus).
    return len(assigned) == len(bindings) and all(isinstance(a.value, ast.Constant) for a in assigned)


def _where(exc: BaseException, path: Path) -> str:
    """The innermost frame of the candidate's own file, as ``file:line``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"{path.name}:{frames[-1].lineno}" if frames else path.name


def import_file(path: str | Path, prefix: str) -> tuple[Path, str, Any]:
    """Import ``path`` as a fresh module named ``prefix_<stem>_<digest>`` (its folder importable).

    Returns the resolved path, the source and the module; every failure is a CandidateLoadError.
    """
    p = Path(path).resolve()
    source = read_source(p)
    _compile(source, p)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    module_name = f"{prefix}_{p.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, p)
    if spec is None or spec.loader is None:
        raise CandidateLoadError(f"cannot import {p}")
    module = importlib.util.module_from_spec(spec)
    folder = str(p.parent)
    sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        raise CandidateLoadError(f"{p.name} called exit({exc.code}) while importing") from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and not interrupts_are_raised():
            raise
        lines = str(exc).strip().splitlines()  # the first line of a message of several
        message = f": {lines[0]}" + (" …" if len(lines) > 1 else "") if lines else ""
        raise CandidateLoadError(
            f"importing {p.name} failed at {_where(exc, p)}: {type(exc).__name__}{message}"
        ) from None
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return p, source, module


def load_candidate(path: str | Path, entry: str = "kernel", arity: int | None = None) -> Candidate:
    """Import ``path`` as a fresh module (its folder importable for sibling files)."""
    p, source, module = import_file(path, "nodice_candidate")
    fn = getattr(module, entry, None)
    if fn is None:
        raise EntryPointError(f"{p.name} defines no '{entry}'")
    if not callable(fn):
        raise EntryPointError(f"'{entry}' in {p.name} is not callable")
    if arity is not None:
        check_arity(fn, entry, arity)
    return Candidate(p, entry, fn, source)


def load_kernel(
    path: str | Path, entry: str, task: Task, device: torch.device, dtype: torch.dtype
) -> Candidate:
    """The candidate's entry point as the callable the gate runs for ``task`` (a kernel of its arity)."""
    cand = load_candidate(path, entry)
    bound = task.bind_entry(cand.fn, entry, cand.path, device, dtype)
    if bound is None:
        check_arity(cand.fn, entry, task.arity)
        return cand
    return Candidate(cand.path, entry, bound, cand.source)


def check_arity(fn: Callable[..., Any], entry: str, arity: int) -> None:
    """The entry must accept exactly the task's ``arity`` positional arguments."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and some C callables have no signature: judge by running
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    required_kw = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > arity or len(positional) < arity or required_kw:
        raise EntryPointError(
            f"'{entry}' takes {len(required)}"
            + (f"-{len(positional)}" if len(positional) != len(required) else "")
            + f" positional arguments, the task passes {arity}"
        )
