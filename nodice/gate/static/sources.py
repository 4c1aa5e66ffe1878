"""Batch sources: which arguments of a task carry the batch axis, read from the task's signature.

The batch axis is the first dimension unless a contract says otherwise; the
batch symbol is the first dimension of the first tensor argument (``B`` for
``x[B,H]``, ``M`` for ``a[M,K]``, ``T`` for ``x[T,H]``), and every argument whose
first dimension is that symbol carries the batch axis.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from nodice.gate.static.contracts import Contract
from nodice.gate.static.native_text import split_top

_ARG = re.compile(r"(\w+)\s*(?:\[([^\]]*)\])?")


@dataclass(frozen=True)
class BatchArg:
    """A kernel argument whose ``axis`` is a batch-context axis."""

    name: str
    axis: int
    rank: int | None
    note: str


@dataclass(frozen=True)
class EntrySignature:
    """The entry point's parameters in order, and which of them carry a batch axis."""

    params: tuple[str, ...]
    ranks: dict[str, int]
    batch_symbol: str
    batch_args: dict[str, BatchArg]
    # Further axes whose size depends on the batch context (the widest block table's width …).
    context_axes: dict[str, tuple[int, ...]]


@functools.lru_cache(maxsize=64)
def _parse(signature: str) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    start = signature.find("(")
    depth, end = 0, len(signature)
    for i in range(max(start, 0), len(signature)):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(signature[i], 0)
        if depth == 0:
            end = i
            break
    inner = signature[start + 1 : end] if start >= 0 else ""
    args: list[tuple[str, tuple[str, ...] | None]] = []
    for raw in (a.strip() for a in split_top(inner, "[(", "])")):
        am = _ARG.match(raw)
        if not am:
            continue
        dims = tuple(d.strip() for d in am.group(2).split(",")) if am.group(2) is not None else None
        args.append((am.group(1), dims))
    return tuple(args)


def entry_signature(signature: str, contract: Contract, batch_symbol: str | None = None) -> EntrySignature:
    """``batch_symbol`` names the batch dimension wherever it stands (default: the first tensor's first)."""
    args = _parse(signature)
    params = tuple(name for name, _ in args)
    ranks = {name: len(dims) for name, dims in args if dims is not None}
    tensors = [(name, dims) for name, dims in args if dims]
    symbol = batch_symbol or (tensors[0][1][0] if tensors else "B")
    batch: dict[str, BatchArg] = {}
    for name, dims in tensors:
        if dims and symbol in dims and (batch_symbol is not None or dims[0] == symbol):
            axis = dims.index(symbol)
            batch[name] = BatchArg(name, axis, len(dims), f"batch axis {symbol} of argument {name}")
    context: dict[str, tuple[int, ...]] = {}
    for name, axis, note in contract.batch_args:
        if name not in params:
            continue
        if name in batch and batch[name].axis != axis:
            context[name] = (*context.get(name, ()), axis)
        else:
            batch[name] = BatchArg(name, axis, ranks.get(name), note or f"batch-context axis of {name}")
    return EntrySignature(params, ranks, symbol, batch, context)
