"""Contracts: executable Python files that declare batch sources and protected parameters.

A contract file calls the DSL functions below (no import needed)::

    contract("split_kv_decode", subtype_of="attention", tasks=["attention_decode"])
    batch_symbols("num_seqs", "num_reqs")
    batch_arg("k_cache", axis=0, note="the page pool grows with the batch's pages")
    protect("NUM_SPLITS", aliases=["num_kv_splits", "kv_splits"], mechanism="work_partitioning")
    reduction_tiles("BLOCK_N", "BLOCK_KV")
    routing_calls("topk")

Contracts are layered: the global contract, the task's family contract, the
subtype contracts that name the task, then the user's ``--contract`` files. The
analyzer sees one merged :class:`Contract`.
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nodice.errors import ContractError
from nodice.gate.static.rules import MECHANISMS

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "contracts"
_SCOPES = ("global", "family", "subtype", "user")


def _norm(name: str) -> str:
    return name.lower()


def _family(name: str) -> str:
    """``linear attention``, ``linear_attention`` and ``Linear-Attention`` name one family."""
    return name.lower().replace("-", " ").replace("_", " ").strip()


@dataclass(frozen=True)
class Protected:
    """A parameter whose value must not depend on the batch context."""

    name: str
    aliases: frozenset[str]
    mechanism: str
    guidance: str = ""
    # Names that are protected only where random numbers are drawn (e.g. ``offset``).
    rng_aliases: frozenset[str] = frozenset()

    def matches(self, name: str, rng_context: bool = False) -> bool:
        n = _norm(name)
        return n in self.aliases or (rng_context and n in self.rng_aliases)


@dataclass(frozen=True)
class Contract:
    """One contract file, or the merge of the layers that apply to a task."""

    name: str
    scope: str = "user"
    family: str = ""
    tasks: tuple[str, ...] = ()
    batch_symbols: frozenset[str] = frozenset()
    batch_args: tuple[tuple[str, int, str], ...] = ()
    protected: tuple[Protected, ...] = ()
    reduction_tiles: frozenset[str] = frozenset()
    routing_calls: frozenset[str] = frozenset()
    sources: tuple[str, ...] = ()

    @functools.cached_property
    def _aliases(self) -> tuple[dict[str, Protected], dict[str, Protected]]:
        strict: dict[str, Protected] = {}
        rng: dict[str, Protected] = {}
        for p in self.protected:
            for a in p.aliases:
                strict.setdefault(a, p)
            for a in p.rng_aliases:
                rng.setdefault(a, p)
        return strict, rng

    def protected_for(self, name: str, rng_context: bool = False) -> Protected | None:
        strict, rng = self._aliases
        n = name.lower()
        found = strict.get(n)
        if found is None and rng_context:
            found = rng.get(n)
        return found

    def is_batch_symbol(self, name: str) -> bool:
        return name.lower() in self.batch_symbols

    def is_reduction_tile(self, name: str) -> bool:
        return name.lower() in self.reduction_tiles

    def merge(self, other: Contract) -> Contract:
        """Later layers add to earlier ones; a protected name declared again gains aliases."""
        protected = {p.name: p for p in self.protected}
        for p in other.protected:
            if p.name in protected:
                old = protected[p.name]
                protected[p.name] = replace(
                    old,
                    aliases=old.aliases | p.aliases,
                    rng_aliases=old.rng_aliases | p.rng_aliases,
                    guidance=p.guidance or old.guidance,
                )
            else:
                protected[p.name] = p
        return Contract(
            name=f"{self.name}+{other.name}" if self.name else other.name,
            scope="merged",
            family=other.family or self.family,
            tasks=self.tasks + other.tasks,
            batch_symbols=self.batch_symbols | other.batch_symbols,
            batch_args=self.batch_args + other.batch_args,
            protected=tuple(protected.values()),
            reduction_tiles=self.reduction_tiles | other.reduction_tiles,
            routing_calls=self.routing_calls | other.routing_calls,
            sources=self.sources + other.sources,
        )


@dataclass
class _Builder:
    """The state a contract file fills in through the DSL functions."""

    path: str
    name: str = ""
    scope: str = "user"
    family: str = ""
    tasks: list[str] = field(default_factory=list)
    symbols: set[str] = field(default_factory=set)
    batch_args: list[tuple[str, int, str]] = field(default_factory=list)
    protected: list[Protected] = field(default_factory=list)
    tiles: set[str] = field(default_factory=set)
    routing: set[str] = field(default_factory=set)

    def namespace(self) -> dict[str, Any]:
        return {
            "contract": self.contract,
            "batch_symbols": self.batch_symbols,
            "batch_arg": self.batch_arg,
            "protect": self.protect,
            "reduction_tiles": self.reduction_tiles,
            "routing_calls": self.routing_calls,
            "MECHANISMS": MECHANISMS,
        }

    def contract(
        self,
        name: str,
        *,
        scope: str | None = None,
        family: str = "",
        subtype_of: str = "",
        tasks: Iterable[str] = (),
    ) -> None:
        if self.name:
            raise ContractError(f"{self.path}: contract() called twice")
        self.name = _text(name, "contract name", self.path)
        self.family = family or subtype_of
        self.scope = scope or ("subtype" if subtype_of else "family" if family else "user")
        if self.scope not in _SCOPES:
            raise ContractError(f"{self.path}: scope must be one of {', '.join(_SCOPES)}")
        self.tasks = [_text(t, "task", self.path) for t in tasks]

    def batch_symbols(self, *names: str) -> None:
        self.symbols.update(_norm(_text(n, "batch symbol", self.path)) for n in names)

    def batch_arg(self, name: str, axis: int = 0, note: str = "") -> None:
        if not isinstance(axis, int):
            raise ContractError(f"{self.path}: batch_arg axis must be an int")
        self.batch_args.append((_text(name, "argument", self.path), axis, str(note)))

    def protect(
        self,
        name: str,
        aliases: Iterable[str] = (),
        *,
        mechanism: str = "work_partitioning",
        guidance: str = "",
        rng_aliases: Iterable[str] = (),
    ) -> None:
        if mechanism not in MECHANISMS:
            raise ContractError(
                f"{self.path}: unknown mechanism '{mechanism}' (known: {', '.join(MECHANISMS)})"
            )
        name = _text(name, "protected name", self.path)
        names = {_norm(name)} | {_norm(_text(a, "alias", self.path)) for a in aliases}
        rng = frozenset(_norm(_text(a, "alias", self.path)) for a in rng_aliases)
        self.protected.append(Protected(name, frozenset(names), mechanism, str(guidance), rng))

    def reduction_tiles(self, *names: str) -> None:
        self.tiles.update(_norm(_text(n, "tile", self.path)) for n in names)

    def routing_calls(self, *names: str) -> None:
        self.routing.update(_text(n, "routing call", self.path) for n in names)

    def build(self) -> Contract:
        return Contract(
            name=self.name or Path(self.path).stem,
            scope=self.scope,
            family=self.family,
            tasks=tuple(self.tasks),
            batch_symbols=frozenset(self.symbols),
            batch_args=tuple(self.batch_args),
            protected=tuple(self.protected),
            reduction_tiles=frozenset(self.tiles),
            routing_calls=frozenset(self.routing),
            sources=(self.path,),
        )


# The builder of the contract file being executed. The DSL functions below write into it, so a
# contract file may import them (for linters and editors) or use them as provided.
_CURRENT: contextvars.ContextVar[_Builder | None] = contextvars.ContextVar("nodice_contract", default=None)


def _builder() -> _Builder:
    b = _CURRENT.get()
    if b is None:
        raise ContractError("contract DSL functions only work inside a contract file (parse_contract_file)")
    return b


def contract(
    name: str, *, scope: str | None = None, family: str = "", subtype_of: str = "", tasks: Iterable[str] = ()
) -> None:
    """Name this contract; ``family=`` for a family contract, ``subtype_of=`` + ``tasks=`` for a subtype."""
    _builder().contract(name, scope=scope, family=family, subtype_of=subtype_of, tasks=tasks)


def batch_symbols(*names: str) -> None:
    """Names that mean the number of samples in the batch wherever the analyzer cannot see their origin."""
    _builder().batch_symbols(*names)


def batch_arg(name: str, axis: int = 0, note: str = "") -> None:
    """An entry argument whose ``axis`` grows with the batch (beyond those the task signature shows)."""
    _builder().batch_arg(name, axis, note)


def protect(
    name: str,
    aliases: Iterable[str] = (),
    *,
    mechanism: str = "work_partitioning",
    guidance: str = "",
    rng_aliases: Iterable[str] = (),
) -> None:
    """A parameter that must not depend on the batch, with the names it goes by."""
    _builder().protect(name, aliases, mechanism=mechanism, guidance=guidance, rng_aliases=rng_aliases)


def reduction_tiles(*names: str) -> None:
    """Constexpr names that tile a reduction axis (used where the kernel body does not show it)."""
    _builder().reduction_tiles(*names)


def routing_calls(*names: str) -> None:
    """Calls whose inputs decide routing (``topk`` …): batch-dependent inputs there are routing flows."""
    _builder().routing_calls(*names)


def _text(value: object, what: str, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ContractError(f"{path}: {what} must be a non-empty string, got {value!r}")
    return value


def parse_contract_file(path: str | Path) -> Contract:
    """Execute one contract file and return what it declares. Raises :class:`ContractError`."""
    full = os.path.abspath(path)
    try:
        stat = os.stat(full)
    except OSError:
        raise ContractError(f"no such contract file: {path}") from None
    return _parse_cached(full, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=128)
def _parse_cached(path: str, mtime_ns: int, size: int) -> Contract:
    builder = _Builder(Path(path).name)
    namespace: dict[str, Any] = {"__name__": "nodice_contract", "__file__": path, **builder.namespace()}
    token = _CURRENT.set(builder)
    try:
        if os.path.dirname(path) == str(SHIPPED_DIR):
            _exec_shipped(path, namespace)
        else:
            source = Path(path).read_text(encoding="utf-8")
            exec(compile(source, path, "exec"), namespace)
    except ContractError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"cannot read contract {path}: {exc}") from None
    except SyntaxError as exc:
        raise ContractError(f"syntax error in contract {Path(path).name}:{exc.lineno}: {exc.msg}") from None
    except Exception as exc:
        raise ContractError(f"contract {Path(path).name} failed: {type(exc).__name__}: {exc}") from None
    finally:
        _CURRENT.reset(token)
    return builder.build()


def _exec_shipped(path: str, namespace: dict[str, Any]) -> None:
    """Shipped contracts run through the import machinery, which keeps their bytecode cached."""
    spec = importlib.util.spec_from_file_location(f"nodice.contracts.{Path(path).stem}", path)
    if spec is None or spec.loader is None:
        raise ContractError(f"cannot load contract {path}")
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update({k: v for k, v in namespace.items() if not k.startswith("__")})
    spec.loader.exec_module(module)


def shipped_contracts() -> list[Contract]:
    return [parse_contract_file(p) for p in sorted(SHIPPED_DIR.glob("*.py")) if not p.name.startswith("_")]


@functools.lru_cache(maxsize=64)
def _layered(task: str, family: str, extra: tuple[str, ...]) -> Contract:
    layers = shipped_contracts()
    order = {"global": 0, "family": 1, "subtype": 2, "user": 3}
    chosen = [
        c
        for c in layers
        if c.scope == "global"
        or (c.scope == "family" and _family(c.family) == _family(family) and not c.tasks)
        or (c.scope in ("family", "subtype") and task in c.tasks)
    ]
    chosen.sort(key=lambda c: order.get(c.scope, 3))
    chosen += [parse_contract_file(p) for p in extra]
    merged = Contract(name="")
    for c in chosen:
        merged = merged.merge(c)
    return merged


def contract_for(task: str, family: str, extra: Iterable[str | Path] = ()) -> Contract:
    """The merged contract for a task: global → family → subtypes → user files (cached)."""
    paths = []
    for e in extra:
        p = Path(e)
        if not p.is_file():
            raise ContractError(f"no such contract file: {p}")
        paths.append(str(p.resolve()))
    return _layered(task, family, tuple(paths))
