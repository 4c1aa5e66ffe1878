"""Module-level state: globals, module-level dicts, caches and objects that functions write.

A function that declares ``global TILE`` and assigns it, stores into a module-level dict
(``_CFG["split"] = …``, ``_CACHE.setdefault(key, …)``, ``.update``) or sets an attribute of a
module-level object (``_STATE.block = …``, ``helpers.TILE = …``) changes what every later read
sees, in this call and in the next one. Such stores are weak (joined with what the state held), so
a batch-dependent write is never undone by a clean one on another path, and the analysis is rerun
while a pass leaves more module-level state batch-dependent than it found: a read that runs before
the write (the launch reads what the previous call configured) sees it on the next pass.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from nodice.gate.static.values import Instance, V, join

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo

# Passes over the entry point at most (each one after the first only when module state got tainted).
MAX_STATE_PASSES = 3


def weak_join(old: V, new: V) -> V:
    """What a slot holds after another write: either value. A lazily filled slot (``_KERNEL = None``
    until the first call builds it) is the built value, so a cached kernel or config stays followable."""
    if old.taint is None and old.const is None and old.kind == "value":
        return new
    return join(old, new)


def _payload(v: V) -> Any:
    """The mutable part of a value that stores change in place."""
    if v.kind == "dict":
        return v.keys
    if v.kind == "instance":
        return v.ref.attrs if isinstance(v.ref, Instance) else None
    if v.kind == "class":
        return getattr(v.ref, "env", None)
    return None


class StateMixin:
    an: Analysis
    mod: ModuleInfo
    module_level: bool
    declared_globals: set[str]

    def s_Global(self, s: ast.Global) -> None:
        self.declared_globals.update(s.names)

    def store_global(self, mod: ModuleInfo, name: str, value: V) -> None:
        """``global TILE; TILE = …`` in a function, or ``helpers.TILE = …``: the module's binding."""
        old = mod.env.get(name)
        mod.env[name] = value if old is None else weak_join(old, value)

    def is_module_state(self, slots: dict[Any, V]) -> bool:
        """Whether ``slots`` (a dict's keys, an object's attributes) belong to a module-level value."""
        for m in self.an.modules.values():
            if m is not None and any(_payload(v) is slots for v in m.env.values()):
                return True
        return False

    def store_slot(self, slots: dict[Any, V], key: Any, value: V) -> None:
        """A store into a dict or an object: weak where the container is module-level state."""
        old = slots.get(key)
        if old is not None and not self.module_level and self.is_module_state(slots):
            value = weak_join(old, value)
        slots[key] = value


def _slot_name(key: Any) -> str:
    """A slot's name; the entries stored under unknown keys (``("?", n)``) count as one slot."""
    return "?" if isinstance(key, tuple) and key[:1] == ("?",) else repr(key)


def _tainted_slots(v: V, where: str, out: set[str], seen: set[int], depth: int = 0) -> None:
    """Where in ``v`` (itself, its entries, attributes, items, nested a few levels) a batch value is."""
    if v.taint is not None:
        out.add(where)
    if depth >= 4 or id(v) in seen:
        return
    seen.add(id(v))
    slots = _payload(v)
    if slots is not None:
        for k, s in slots.items():
            _tainted_slots(s, f"{where}.{_slot_name(k)}", out, seen, depth + 1)
    elif v.kind == "seq" and v.items is not None:
        for s in v.items:
            _tainted_slots(s, f"{where}[]", out, seen, depth + 1)


def state_taint(an: Analysis) -> frozenset[str]:
    """The module-level slots (globals, their entries, attributes and items) that hold a batch value."""
    out: set[str] = set()
    seen: set[int] = set()
    for m in an.modules.values():
        if m is None:
            continue
        for name, v in m.env.items():
            if v.kind not in ("func", "kernel", "module", "py"):
                _tainted_slots(v, f"{m.display}:{name}", out, seen)
    return frozenset(out)
