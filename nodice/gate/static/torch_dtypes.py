"""Dtypes in the Python dataflow: tensors that hold integers, and conversions to a named dtype.

Two questions need them. Whether a reduction over a piece the batch cut is exact: a maximum, an
index or a count gives the same bits however the terms are grouped, and so does a sum that
accumulates integers (``(p > t).sum(-1)``, ``p.sum(-1, dtype=torch.int64)``), unlike a float sum.
And which precision a tensor is computed in: a conversion to another dtype under a batch-dependent
branch makes the tensor's dtype depend on the batch.
"""

from __future__ import annotations

from nodice.gate.static.values import V

# Reductions whose result does not depend on how their terms are grouped: over a piece the batch
# cut, each gives the piece's exact maximum, index, count or truth value, whatever the cut.
EXACT_REDUCTIONS = frozenset(
    {"max", "min", "amax", "amin", "aminmax", "argmax", "argmin", "any", "all", "count_nonzero"}
)
# Reductions that are exact when they accumulate integers.
INTEGER_EXACT = frozenset({"sum", "cumsum", "prod", "cumprod"})
# Conversion methods and the dtype they give.
METHOD_DTYPES = {
    "int": "int32",
    "long": "int64",
    "short": "int16",
    "byte": "uint8",
    "char": "int8",
    "bool": "bool",
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
}


def dtype_name(v: V | None) -> str | None:
    """``torch.float16`` → ``"float16"``; None where ``v`` is not a dtype the analyzer can name."""
    if v is None or v.kind != "py" or not isinstance(v.ref, str) or not v.ref.startswith("torch."):
        return None
    name = v.ref.removeprefix("torch.")
    aliases = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32"}
    name = aliases.get(name, name)
    known = name.startswith(("float", "bfloat", "int", "uint", "complex")) or name == "bool"
    return name if known else None


def is_integral(name: str | None) -> bool:
    return name is not None and (name.startswith(("int", "uint")) or name == "bool")


# The methods :func:`converted_to` can name a dtype for.
CONVERSION_METHODS = frozenset((*METHOD_DTYPES, "to", "type"))


def converted_to(fn: str, args: list[V], kwargs: dict[str, V]) -> str | None:
    """The dtype a conversion method gives its tensor (``x.half()``, ``x.to(torch.float16)``,
    ``x.to(device, dtype=…)``, ``x.type(torch.int32)``); None for anything else."""
    if fn in METHOD_DTYPES and not args and "dtype" not in kwargs:
        return METHOD_DTYPES[fn]
    if fn in ("to", "type"):
        return next((n for n in (dtype_name(a) for a in [*args, kwargs.get("dtype")]) if n), None)
    return None


def exact_reduction(fn: str, recv: V, kwargs: dict[str, V]) -> bool:
    """Whether ``fn`` over ``recv`` gives the same bits however its terms are grouped: a maximum, an
    index, a count or a truth value, or a sum of integers (its own ``dtype=`` says so, or the
    tensor holds integers or booleans and no float ``dtype=`` is asked for)."""
    if fn in EXACT_REDUCTIONS:
        return True
    if fn not in INTEGER_EXACT:
        return False
    asked = dtype_name(kwargs.get("dtype"))
    return is_integral(asked) if asked is not None else recv.integral
