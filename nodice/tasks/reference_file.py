"""A KernelBench-style reference file: ``Model``, ``get_inputs()``, ``get_init_inputs()``.

:func:`read_reference` imports the file, calls ``get_inputs()`` once and runs
``Model`` on what it returns, and checks everything the gate relies on: every
tensor input and every output carries the batch axis, with one batch size.
Each failure is a :class:`nodice.errors.ReferenceFileError`, one line naming the file and
what is wrong with it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nodice.errors import CandidateLoadError, NodiceError, ReferenceFileError

# ``Model`` and ``ModelNew`` are built under this seed, so parameters a module draws at
# construction are the same in both (KernelBench seeds both constructions alike).
INIT_SEED = 42


@dataclass(frozen=True)
class InputSlot:
    """One positional argument of ``Model.forward``: a batched tensor or a value passed through."""

    name: str
    batched: bool
    shape: tuple[int, ...] = ()
    dtype: torch.dtype | None = None
    value: Any = None


@dataclass(frozen=True)
class OutputSlot:
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class ReferenceFile:
    """What the gate needs to know about a reference file, read once."""

    path: Path
    batch_axis: int
    batch: int  # the batch size get_inputs() returns: the "full" batch
    inputs: tuple[InputSlot, ...]
    outputs: tuple[OutputSlot, ...]
    model_cls: type[torch.nn.Module]
    get_inputs: Callable[[], Any]
    init_inputs: tuple[Any, ...]
    # The tuple/list shape of Model's return value (False: one tensor).
    returns_tuple: bool


def _where(exc: BaseException, path: Path) -> str:
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" at {path.name}:{frames[-1].lineno}" if frames else ""


def call_user(
    fn: Callable[[], Any], what: str, path: Path, error: type[NodiceError] = ReferenceFileError
) -> Any:
    """Run user code; any exception becomes one ``error`` line naming ``what`` and where it failed."""
    try:
        return fn()
    except NodiceError:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        msg = (str(exc).strip().splitlines() or [""])[0]
        raise error(f"{what} failed{_where(exc, path)}: {type(exc).__name__}: {msg}"[:400]) from None


def as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ReferenceFileError(f"{what} must return a list or tuple, not {type(value).__name__}")


def forward_names(cls: type, count: int) -> list[str]:
    """Names of ``cls.forward``'s positional parameters (``arg<i>`` where it has none)."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())[1:]  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def seeded(fn: Callable[[], Any], seed: int) -> Any:
    """``fn()`` with torch's global generators seeded, leaving the caller's state as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn()


def _read_inputs(path: Path, raw: list[Any], axis: int, names: list[str]) -> tuple[int, list[InputSlot]]:
    slots: list[InputSlot] = []
    batch: int | None = None
    first = ""
    for i, (name, value) in enumerate(zip(names, raw, strict=True)):
        label = f"input {i} ({name})"
        if not isinstance(value, torch.Tensor):
            slots.append(InputSlot(name, False, value=value))
            continue
        if value.dim() <= axis:
            raise ReferenceFileError(
                f"{path.name}: {label} has shape {tuple(value.shape)}, no batch axis {axis} "
                "(every tensor input must carry the batch axis; see --batch-axis)"
            )
        size = int(value.shape[axis])
        if batch is None:
            batch, first = size, label
        elif size != batch:
            raise ReferenceFileError(
                f"{path.name}: {label} has {size} on batch axis {axis}, {first} has {batch} "
                "(every tensor input must carry the batch axis; see --batch-axis)"
            )
        slots.append(InputSlot(name, True, tuple(value.shape), value.dtype))
    if batch is None:
        raise ReferenceFileError(f"{path.name}: get_inputs() returns no tensor, so there is no batch axis")
    if batch < 1:
        raise ReferenceFileError(f"{path.name}: get_inputs() returns an empty batch (size 0 on axis {axis})")
    return batch, slots


def _read_outputs(path: Path, out: Any, axis: int, batch: int) -> tuple[list[OutputSlot], bool]:
    is_tuple = isinstance(out, (tuple, list))
    outs = list(out) if is_tuple else [out]
    if not outs:
        raise ReferenceFileError(f"{path.name}: Model returns an empty {type(out).__name__}")
    slots = []
    for i, o in enumerate(outs):
        label = f"output {i}" if is_tuple else "the output"
        if not isinstance(o, torch.Tensor):
            raise ReferenceFileError(f"{path.name}: {label} of Model is a {type(o).__name__}, not a tensor")
        if o.dim() <= axis or int(o.shape[axis]) != batch:
            raise ReferenceFileError(
                f"{path.name}: {label} of Model has shape {tuple(o.shape)}, not {batch} on batch axis "
                f"{axis} like the inputs: a sample's output must be its slice of the batch"
            )
        slots.append(OutputSlot(tuple(o.shape), o.dtype))
    return slots, is_tuple


def read_reference(path: str | Path, batch_axis: int = 0) -> ReferenceFile:
    """Import and validate a reference file (runs its ``get_inputs`` and ``Model`` once, on CPU)."""
    from nodice.loader import import_file

    if batch_axis < 0:
        raise ReferenceFileError(f"--batch-axis must be 0 or more, not {batch_axis}")
    try:
        p, _, module = import_file(path, "nodice_reference")
    except CandidateLoadError as exc:
        raise ReferenceFileError(str(exc)) from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ReferenceFileError(
            f"{p.name} defines no {', '.join(missing)} (a reference needs Model, get_inputs and "
            "get_init_inputs)"
        )
    model_cls = module.Model
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise ReferenceFileError(f"Model in {p.name} is not a torch.nn.Module class")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name)):
            raise ReferenceFileError(f"{name} in {p.name} is not callable")
    init = tuple(as_list(call_user(module.get_init_inputs, "get_init_inputs()", p), "get_init_inputs()"))
    raw = as_list(seeded(lambda: call_user(module.get_inputs, "get_inputs()", p), INIT_SEED), "get_inputs()")
    if not raw:
        raise ReferenceFileError(f"{p.name}: get_inputs() returns no inputs")
    names = forward_names(model_cls, len(raw))
    batch, inputs = _read_inputs(p, raw, batch_axis, names)
    model = seeded(lambda: call_user(lambda: model_cls(*init), "Model(*get_init_inputs())", p), INIT_SEED)
    with torch.no_grad():
        out = call_user(lambda: model(*raw), "Model.forward(*get_inputs())", p)
    outputs, is_tuple = _read_outputs(p, out, batch_axis, batch)
    return ReferenceFile(
        p, batch_axis, batch, tuple(inputs), tuple(outputs), model_cls, module.get_inputs, init, is_tuple
    )
