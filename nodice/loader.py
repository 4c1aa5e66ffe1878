"""Load a candidate file and find its entry point, turning every failure into one typed error."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.errors import CandidateLoadError, EntryPointError

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
    try:
        compile(source, str(p), "exec")
    except SyntaxError as exc:
        raise CandidateLoadError(f"syntax error in {p.name}:{exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes
        raise CandidateLoadError(f"cannot compile {p.name}: {exc}") from None
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
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise CandidateLoadError(
            f"importing {p.name} failed at {_where(exc, p)}: {type(exc).__name__}: {exc}"
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
