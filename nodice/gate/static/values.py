"""Abstract values of the dataflow analysis and the dependency traces they carry.

A :class:`V` describes what the analyzer knows about one Python value: whether it
depends on the batch context (``taint``: the trace from a batch source to here),
whether it is a tensor whose first axis is the batch axis (``batch``), and, for
containers, shapes, callables and objects, enough structure to follow a flow
through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# One line per step from a batch source to the current value, e.g.
# "line 41: B = x.shape[0]  (batch source: x.shape[0])".
Trace = tuple[str, ...]

MAX_TRACE = 14

NO_CONST: Any = object()


@dataclass(slots=True)
class V:
    """What is known about one value."""

    taint: Trace | None = None
    # value|tensor|shape|seq|dict|func|kernel|class|instance|module|py|method|choice|generator|nnmodule
    kind: str = "value"
    batch: Trace | None = None  # tensors: the first axis is the batch axis (why we think so)
    rank: int | None = None
    items: list[V] | None = None  # shape / seq / choice alternatives
    keys: dict[Any, V] | None = None  # dict with constant keys
    const: Any = NO_CONST
    ref: Any = None  # func/kernel/class/module/instance/py/method payload
    opaque: bool = False  # the analyzer does not know where it comes from
    baxis: int = 0  # tensors: which axis ``batch`` refers to
    ctx: tuple[int, ...] = ()  # tensors: other axes whose size depends on the batch context
    cut: Trace | None = None  # tensors: why the ``ctx`` axes' sizes depend on it (the count or size)
    integral: bool = False  # tensors: holds integers or booleans (a comparison, an integer cast)
    dtype: str | None = None  # tensors: the dtype a conversion gave it (None: as it came)
    extent: tuple[Any, ...] | None = None  # a fixed tile of the batch and its padding (gate.static.tiles)

    @property
    def tainted(self) -> bool:
        return self.taint is not None

    def retrace(self, taint: Trace | None) -> V:
        """The same value with its trace replaced (e.g. one step longer)."""
        return V(
            taint,
            self.kind,
            self.batch,
            self.rank,
            self.items,
            self.keys,
            self.const,
            self.ref,
            self.opaque,
            self.baxis,
            self.ctx,
            self.cut,
            self.integral,
            self.dtype,
            self.extent,
        )

    def with_taint(self, taint: Trace | None) -> V:
        """The value tainted by ``taint`` unless it already carries a trace (the first one wins)."""
        if taint is None or self.taint is not None:
            return self
        return self.retrace(taint)


UNKNOWN = V(opaque=True)
CLEAN = V()


def first_taint(*values: V | None) -> Trace | None:
    """The trace of the first tainted value (left to right: the operand nearest the source)."""
    for v in values:
        if v is not None and v.taint is not None:
            return v.taint
    return None


def deep_taint(*values: V | None) -> Trace | None:
    """Like :func:`first_taint`, but also looks one level into tuples, lists and shapes."""
    for v in values:
        if v is None:
            continue
        if v.taint is not None:
            return v.taint
        if v.items is not None and v.kind in ("seq", "shape"):
            t = first_taint(*v.items)
            if t is not None:
                return t
        elif v.kind == "shape" and v.batch is not None:
            return v.batch
    return None


def extend(trace: Trace | None, step: str) -> Trace | None:
    """Append a step unless the trace already ends on the same line."""
    if trace is None:
        return None
    if trace and _line_key(trace[-1]) == _line_key(step):
        return trace
    if len(trace) >= MAX_TRACE:
        trace = (*trace[:3], "…", *trace[-(MAX_TRACE - 5) :])
    return (*trace, step)


def _line_key(step: str) -> str:
    return step.split(": ", 1)[0]


def int_const(v: V | None) -> int | None:
    """The value's constant when it is an int (not a bool); ``None`` otherwise."""
    if v is None or v.const is NO_CONST or isinstance(v.const, bool) or not isinstance(v.const, int):
        return None
    return int(v.const)


def plain(taint: Trace | None = None, opaque: bool = False) -> V:
    return V(taint=taint, opaque=opaque)


def join(a: V, b: V) -> V:
    """The value after two control-flow paths meet."""
    if a is b:
        return a
    taint = a.taint or b.taint
    if (
        a.kind == b.kind
        and a.ref is b.ref
        and a.kind in ("func", "kernel", "class", "module", "py", "instance")
    ):
        return a.with_taint(taint)
    if a.kind == b.kind == "nnmodule" and a.ref == b.ref:
        return a.with_taint(taint)
    if a.kind == b.kind == "instance" and a.ref.cls is b.ref.cls:
        attrs = dict(a.ref.attrs)
        for k, v in b.ref.attrs.items():
            attrs[k] = join(attrs[k], v) if k in attrs else v
        return V(taint=taint, kind="instance", ref=Instance(a.ref.cls, attrs))
    if a.kind in ("func", "kernel", "choice") and b.kind in ("func", "kernel", "choice"):
        alts = (a.items if a.kind == "choice" else [a]) or []
        alts = alts + [x for x in ((b.items if b.kind == "choice" else [b]) or []) if x not in alts]
        return V(taint=taint, kind="choice", items=alts)
    if {a.kind, b.kind} == {"tensor", "value"}:
        t, other = (a, b) if a.kind == "tensor" else (b, a)
        if other.const is None or other.opaque:
            # ``out = None`` before a loop that sets ``out = term if out is None else out + term``,
            # or a path returning what a call the analyzer does not follow gave: after the paths
            # meet it is still that tensor on the other path, not an untracked value.
            return t.with_taint(taint)
    if a.kind == "tensor" and b.kind == "tensor":
        return V(
            taint=taint,
            kind="tensor",
            batch=a.batch or b.batch,
            rank=a.rank if a.rank == b.rank else None,
            extent=a.extent if a.extent == b.extent else None,
        )
    same_seq = a.kind in ("seq", "shape") and b.kind == a.kind
    if same_seq and a.items is not None and b.items is not None and len(a.items) == len(b.items):
        return V(taint=taint, kind=a.kind, items=[join(x, y) for x, y in zip(a.items, b.items, strict=True)])
    if a.kind == "dict" and b.kind == "dict" and a.keys is not None and b.keys is not None:
        keys = dict(a.keys)
        for k, v in b.keys.items():
            keys[k] = join(keys[k], v) if k in keys else v
        return V(taint=taint, kind="dict", keys=keys)
    const = a.const if a.const is not NO_CONST and a.const == b.const else NO_CONST
    return V(taint=taint, const=const, opaque=a.opaque or b.opaque)


def join_all(values: list[V]) -> V:
    if not values:
        return V()
    out = values[0]
    for v in values[1:]:
        out = join(out, v)
    return out


def unknown_key_taint(keys: dict[Any, V]) -> Trace | None:
    """The trace of a batch value stored under a key the analyzer does not know (``("?", n)``): a
    lookup of any constant key may find it."""
    for k, v in keys.items():
        if v.taint is not None and isinstance(k, tuple) and k[:1] == ("?",):
            return v.taint
    return None


def merge_envs(a: dict[str, V], b: dict[str, V]) -> dict[str, V]:
    out = dict(a)
    for k, v in b.items():
        out[k] = join(out[k], v) if k in out else v
    return out


@dataclass
class Instance:
    """An object of a class defined in the candidate's files; attributes are tracked by name."""

    cls: Any
    attrs: dict[str, V] = field(default_factory=dict)
