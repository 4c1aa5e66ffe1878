"""A FlashInfer-Bench definition's ``reference`` code: compiled once, run, and what it returns checked.

The reference is the definition's, not the solution's: whatever goes wrong with it (its code does
not load, raises, returns other than the definition's outputs, or NaN for the gate's finite inputs,
:mod:`nodice.tasks.reference_output`) is a :class:`nodice.errors.DefinitionError`, one line naming
the definition, exit code 2; never a crash or a verdict of the solution's.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import torch

from nodice.errors import DefinitionError
from nodice.tasks.reference_output import unusable_output


def reference_file(definition: Any) -> str:
    """The file name the reference's code is compiled under (tracebacks and messages name it)."""
    return f"<{definition.name}.reference>"


def compile_reference(definition: Any) -> Callable[..., Any]:
    """The reference's ``run``."""
    namespace: dict[str, Any] = {"__name__": f"flashinfer_definition_{definition.name}"}
    try:
        exec(compile(definition.reference, reference_file(definition), "exec"), namespace)
    except Exception as exc:
        raise DefinitionError(f"definition {definition.name}: its reference fails to load: {exc}") from None
    run = namespace.get("run")
    if not callable(run):
        raise DefinitionError(f"definition {definition.name}: its reference defines no function run")
    return run  # type: ignore[no-any-return]


def as_outputs(definition: Any, out: Any) -> tuple[Any, ...]:
    """A returned value as the definition's outputs in order (tuple, list, dict by name, one tensor)."""
    if isinstance(out, dict):
        return tuple(out[n] for n in definition.outputs if n in out)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def run_reference(
    definition: Any, run: Callable[..., Any], inputs: list[Any], args: tuple[Any, ...]
) -> tuple[torch.Tensor, ...]:
    """``run`` on the definition's ``inputs`` (made from the task's arguments ``args``): its outputs, each
    a tensor of the declared shape, else a :class:`DefinitionError` saying what is wrong with them."""
    words = f"definition {definition.name}: its reference"
    try:
        returned = run(*inputs)
    except Exception as exc:  # the definition's own code: its failure is the definition's
        raise DefinitionError(f"{words} raised {_failure(exc)}") from None
    names = tuple(definition.outputs)
    if isinstance(returned, dict) and not set(names) <= set(returned):
        missing = ", ".join(n for n in names if n not in returned)
        raise DefinitionError(f"{words} returns a dict without {missing}")
    outs = as_outputs(definition, returned)
    if len(outs) != len(names):
        raise DefinitionError(
            f"{words} returns {len(outs)} value(s); the definition declares {len(names)} output(s) "
            f"({', '.join(names)})"
        )
    try:
        shapes = definition.get_output_shapes(definition.get_axes_values_from_inputs(inputs))
    except Exception:  # an output axis the inputs do not give: the shapes go unchecked
        shapes = [None] * len(names)
    for name, out, shape in zip(names, outs, shapes, strict=True):
        if not isinstance(out, torch.Tensor):
            raise DefinitionError(f"{words} returns {type(out).__name__} for {name}, not a tensor")
        if shape is not None and tuple(out.shape) != tuple(shape):
            raise DefinitionError(
                f"{words} returns {name} of shape {tuple(out.shape)}; the definition declares "
                f"{tuple(shape)} for these inputs"
            )
    unusable = unusable_output(outs, names, args)
    if unusable:
        raise DefinitionError(f"{words} returns {unusable}: no solution can be judged against it")
    return outs


def _failure(exc: BaseException) -> str:
    """``Type at line N: message``, N the innermost line of the reference's own code."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(".reference>")]
    where = f" at line {lines[-1]}" if lines else ""
    message = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}{where}" + (f": {message}" if message else "")
