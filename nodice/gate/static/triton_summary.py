"""What a summary of a ``@triton.jit`` kernel holds: its sinks, atomics, autotuner and reductions.

:mod:`nodice.gate.static.triton_kernels` fills a :class:`KernelInfo` from the kernel's body and
:mod:`nodice.gate.static.triton_decorators` from its decorators; the launch analysis reads it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from nodice.gate.static.triton_values import KV


@dataclass(frozen=True)
class KernelSink:
    """A place in the kernel where the labels decide a reduction's shape or a random draw."""

    # reduction_tile | reduction_bound | reduction_branch | rng | output | output_reduced, and two that
    # only say what a split count reaches: exact_reduction (the tile, range or masked terms of a
    # reduction whose bits no grouping changes) and ordered_extent (the masked terms of one whose
    # bits the grouping decides).
    kind: str
    labels: frozenset[str]
    line: int
    text: str


@dataclass(frozen=True)
class AtomicSite:
    line: int
    text: str
    certain: bool  # the added value is known to be a float reduction (else: unknown dtype)


@dataclass
class Autotune:
    line: int
    keys: list[str] | None
    varying: set[str] | None  # config entries that differ between configs; None: not visible
    config_params: set[str]


@dataclass
class KernelInfo:
    name: str
    node: ast.FunctionDef
    params: list[str]
    constexprs: set[str]
    sinks: list[KernelSink] = field(default_factory=list)
    atomics: list[AtomicSite] = field(default_factory=list)
    order_sensitive: bool = False  # has a float tl.sum / tl.reduce / cumsum (a cross-thread tree)
    has_dot: bool = False
    ordered_loop: bool = False  # a loop accumulates floats (step by step, in its own order)
    autotune: Autotune | None = None
    heuristics: dict[str, ast.expr] = field(default_factory=dict)
    # The reductions the kernel performs (sum-like calls, reduction loop ranges), by source shape:
    # two kernels with equal signatures fold every sample alike. Kept as nodes; dumped on demand.
    reduction_nodes: list[ast.AST] = field(default_factory=list)
    # A helper's returned values (with the branch conditions they were returned under), in terms
    # of its own parameters: a caller substitutes its arguments for them.
    returns: list[KV] = field(default_factory=list)
    _signature: list[str] | None = None

    @property
    def signature(self) -> list[str]:
        if self._signature is None:
            self._signature = sorted(ast.dump(n, annotate_fields=False) for n in self.reduction_nodes)
        return self._signature

    def param_sinks(self, param: str) -> list[KernelSink]:
        return [s for s in self.sinks if param in s.labels]

    def axis_sinks(self, axis: int) -> list[KernelSink]:
        """Reductions shaped by the *number* of programs along ``axis`` (``tl.num_programs``).

        ``program_id`` alone is harmless there: with a fixed chunk per program, more programs
        only means more idle ones (the fixed-split-size pattern).
        """
        key = f"nprog:{axis}"
        return [s for s in self.sinks if key in s.labels and s.kind in ("reduction_tile", "reduction_bound")]

    @property
    def reduces_in_order(self) -> bool:
        """Whether some reduction's bits depend on the order and grouping of its terms: a float sum,
        a dot, a loop accumulating floats, a float (or unknown) atomic add."""
        return self.order_sensitive or self.has_dot or self.ordered_loop or bool(self.atomics)

    @property
    def rng_params(self) -> set[str]:
        return {lab for s in self.sinks if s.kind == "rng" for lab in s.labels}

    @property
    def reduction_params(self) -> set[str]:
        kinds = ("reduction_tile", "reduction_bound")
        return {lab for s in self.sinks if s.kind in kinds for lab in s.labels if ":" not in lab}
