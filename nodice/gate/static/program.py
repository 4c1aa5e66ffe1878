"""The candidate's program: its parsed files (cached), references to its functions, kernels and
classes, and the state shared by one analysis (contract, findings, memo, sibling modules).
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodice.gate.static.contracts import Contract
from nodice.gate.static.report import Collector
from nodice.gate.static.sources import EntrySignature
from nodice.gate.static.triton_kernels import summarize_kernel
from nodice.gate.static.triton_summary import KernelInfo
from nodice.gate.static.values import Trace, V

MAX_DEPTH = 10
# Statements one analysis may run (a candidate is a few hundred; a pathological file stops here).
MAX_STEPS = 20_000
# Files of the candidate's folder one analysis follows (the candidate and its helper modules).
MAX_MODULES = 16


class BudgetExceeded(Exception):
    """The analysis ran more statements than ``MAX_STEPS``: the file is left to the dynamic stage."""


@dataclass
class ModuleInfo:
    path: Path
    display: str
    tree: ast.Module
    lines: list[str]
    is_candidate: bool
    source: str = ""
    env: dict[str, V] = field(default_factory=dict)
    module_values: dict[str, ast.expr] = field(default_factory=dict)
    kernel_cache: dict[int, KernelInfo] = field(default_factory=dict)
    pins: dict[str, Any] | None = None  # module-level literals nothing rebinds (``pins.py``)


@dataclass
class FuncRef:
    module: ModuleInfo
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    closure: dict[str, V]
    defaults: list[V]
    kw_defaults: dict[str, V] = field(default_factory=dict)
    bound_self: V | None = None

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")


@dataclass
class KernelRef:
    module: ModuleInfo
    node: ast.FunctionDef

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class ClassRef:
    module: ModuleInfo
    node: ast.ClassDef
    env: dict[str, V]
    bases: list[V]
    fields: list[str]

    @property
    def name(self) -> str:
        return self.node.name


class Analysis:
    """State shared by every function analysed for one candidate."""

    def __init__(self, contract: Contract, signature: EntrySignature, folder: Path, collector: Collector):
        self.contract = contract
        self.signature = signature
        self.folder = folder
        self.collector = collector
        self.modules: dict[Path, ModuleInfo | None] = {}
        self.stack: list[int] = []
        self.memo: dict[tuple[Any, ...], V] = {}
        # Per memoised call: the batch-dependent conditions under which the callee raises (a caller's
        # ``try`` around the call jumps to its handler on them).
        self.raise_memo: dict[tuple[Any, ...], list[Trace]] = {}
        self._listing: frozenset[str] | None = None
        self._stored: dict[Path, frozenset[str]] = {}  # attribute stores per folder (pins)
        self.steps = 0
        # The branches after which a tensor's dtype depends on the batch, by their trace step.
        self.dtype_branches: dict[str, dict[str, Any] | None] = {}

    def report(
        self,
        rule_id: str,
        mod: ModuleInfo,
        node: ast.AST,
        protected: str,
        message: str,
        trace: Trace | tuple[str, ...],
        sink_step: str,
        *,
        mechanism: str | None = None,
        guidance: str | None = None,
        weak: bool = False,
        branch: dict[str, Any] | None = None,
    ) -> None:
        self.collector.add(
            rule_id,
            mod.display,
            getattr(node, "lineno", 0),
            protected,
            message,
            [*trace, sink_step] if not trace or trace[-1] != sink_step else list(trace),
            mechanism=mechanism,
            guidance=guidance,
            weak=weak,
            branch=branch,
        )

    def kernel_info(self, ref: KernelRef, consts: dict[str, Any] | None = None) -> KernelInfo:
        """The kernel's summary; with ``consts`` (constexpr parameters a launch passes as literals),
        the summary of that specialisation, where branches on those flags take one side."""
        mod = ref.module
        helpers = {
            name: v.ref.node
            for name, v in mod.env.items()
            if v.kind == "kernel" and isinstance(v.ref, KernelRef)
        }
        return summarize_kernel(ref.node, helpers, mod.kernel_cache, mod.module_values, consts)

    def module(self, path: Path, display: str, is_candidate: bool = False) -> ModuleInfo | None:
        path = Path(os.path.abspath(path))
        if path in self.modules:
            return self.modules[path]
        if len(self.modules) >= MAX_MODULES:
            return None
        self.modules[path] = None  # import cycles see an unknown module
        parsed = parse_file(path)
        if parsed is None:
            return None
        mod = ModuleInfo(
            path,
            display,
            parsed.tree,
            parsed.lines,
            is_candidate,
            parsed.source,
            module_values=parsed.module_values,
            kernel_cache=parsed.kernel_cache,
        )
        self.modules[path] = mod
        from nodice.gate.static.dataflow import Interp

        Interp(self, mod, mod.env, module_level=True).run(parsed.tree.body)
        return mod

    def pins(self, mod: ModuleInfo) -> dict[str, Any]:
        """``mod``'s pins: its literal module constants that no code in the candidate's folder (or
        the module's own) can rebind."""
        if mod.pins is None:
            from nodice.gate.static.pins import module_pins

            found = module_pins(mod.tree)
            if found:
                stored = self._stored_attributes(self.folder) | self._stored_attributes(mod.path.parent)
                found = {} if "*" in stored else {k: v for k, v in found.items() if k not in stored}
            mod.pins = found
        return mod.pins

    def _stored_attributes(self, folder: Path) -> frozenset[str]:
        """``pins.stored_attributes`` of a folder, read once per analysis (every module's pins ask)."""
        from nodice.gate.static.pins import stored_attributes

        key = Path(os.path.abspath(folder))
        if key not in self._stored:
            self._stored[key] = stored_attributes(key)
        return self._stored[key]

    def listing(self) -> frozenset[str]:
        """Names in the candidate's folder, read once (cheaper than a stat per import)."""
        if self._listing is None:
            try:
                self._listing = frozenset(os.listdir(self.folder))
            except OSError:
                self._listing = frozenset()
        return self._listing

    def sibling_exists(self, name: str) -> bool:
        if not name:
            return False
        head, _, rest = name.partition(".")
        if not rest:
            return f"{head}.py" in self.listing() or (
                head in self.listing() and (self.folder / head).is_dir()
            )
        return head in self.listing() and self.sibling_path(name) is not None

    def sibling_path(self, name: str) -> Path | None:
        rel = Path(*name.split("."))
        for cand in (self.folder / rel.with_suffix(".py"), self.folder / rel / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    def sibling(self, name: str, level: int = 0) -> ModuleInfo | None:
        """A module of the candidate's own folder (``helpers`` → ``helpers.py``)."""
        if not self.sibling_exists(name):
            return None
        cand = self.sibling_path(name)
        return self.module(cand, str(cand.relative_to(self.folder))) if cand is not None else None


@dataclass
class Parsed:
    """A parsed file and what depends on its text alone (kernel summaries), cached across runs."""

    tree: ast.Module
    lines: list[str]
    module_values: dict[str, ast.expr]
    kernel_cache: dict[int, KernelInfo]
    source: str


@functools.lru_cache(maxsize=256)
def _parse_cached(path: str, mtime_ns: int, size: int) -> Parsed | None:
    try:
        source = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(source, path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None
    values = {
        s.targets[0].id: s.value
        for s in tree.body
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
    }
    return Parsed(tree, source.splitlines(), values, {}, source)


def parse_file(path: Path) -> Parsed | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return _parse_cached(str(path), st.st_mtime_ns, st.st_size)
