"""The built-in operator's catalog of source rewrites.

Each rewrite is one named idea with a prior (how promising it looks before any
evidence) and a mechanism label. Some are sound structural changes; others are
the batch-adaptive dispatch tricks that speed up a kernel on some batch sizes
and break batch invariance — the gate rejects them, and the operator learns
from that rejection not to propose them again.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, replace

from nodice.evolution.agents import rmsnorm_template as rows

# Eager PyTorch expressions of a task's math, used by the small-batch fallback rewrite.
_EAGER_PATHS = {
    "rmsnorm": (
        "xf = x.float()",
        "return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)",
    ),
}


@dataclass(frozen=True)
class Rewrite:
    name: str
    description: str
    prior: float
    batch_dependent: bool
    apply: Callable[[str, str], str | None]  # (source, task) -> new source, or None if it does not apply

    @property
    def key(self) -> str:
        return f"rewrite:{self.name}"


# ---- sound rewrites (row-wise normalisation) -------------------------------------
def _multi_row_tile(source: str, task: str) -> str | None:
    if task != "rmsnorm":
        return None
    k = rows.knobs_of(source)
    if k is None or k.rows_per_program > 1:
        return None
    return rows.render(replace(k, rows_per_program=4))


def _single_pass(source: str, task: str) -> str | None:
    if task != "rmsnorm":
        return None
    k = rows.knobs_of(source)
    if k is None or k.single_pass:
        return None
    return rows.render(replace(k, single_pass=True))


# ---- batch-adaptive dispatch (rejected by the gate) -------------------------------
def host_kernel(tree: ast.Module) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kernel"), None)


def batch_name(fn: ast.FunctionDef) -> str | None:
    """The host variable holding the batch size: ``batch, hidden = x.shape`` or ``x.shape[0]``."""
    first_arg = fn.args.args[0].arg if fn.args.args else None
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and ast.unparse(value) == f"{first_arg}.shape":
            first = target.elts[0]
            return first.id if isinstance(first, ast.Name) else None
        if isinstance(target, ast.Name) and ast.unparse(value) == f"{first_arg}.shape[0]":
            return target.id
    return None


def host_batch(source: str) -> tuple[ast.FunctionDef, str] | None:
    """The host ``kernel`` function of ``source`` and its batch-size variable, when both are found."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    fn = host_kernel(tree)
    batch = batch_name(fn) if fn else None
    return (fn, batch) if fn is not None and batch is not None else None


def _batch_adaptive_tile(source: str, task: str) -> str | None:
    """Small batches get a narrow reduction tile "to put more programs in flight"."""
    found = host_batch(source)
    if found is None:
        return None
    fn, batch = found
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and "block" in node.targets[0].id.lower()
            and batch not in ast.unparse(node.value)
            and node.lineno == node.end_lineno
        ):
            lines = source.splitlines(keepends=True)
            line = lines[node.lineno - 1]
            expr = ast.unparse(node.value)
            indent = line[: len(line) - len(line.lstrip())]
            lines[node.lineno - 1] = f"{indent}{node.targets[0].id} = 256 if {batch} < 64 else {expr}\n"
            return "".join(lines)
    return None


def _small_batch_eager_path(source: str, task: str) -> str | None:
    """Decode-sized batches skip the launch and run eager PyTorch (latency first)."""
    eager = _EAGER_PATHS.get(task)
    found = host_batch(source)
    if eager is None or found is None or "eager path" in source:
        return None
    fn, batch = found
    anchor = next(n for n in ast.walk(fn) if isinstance(n, ast.Assign) and batch in ast.unparse(n.targets[0]))
    lines = source.splitlines(keepends=True)
    line = lines[anchor.lineno - 1]
    indent = line[: len(line) - len(line.lstrip())]
    block = [f"{indent}if {batch} <= 4:  # eager path: a launch costs more than the work\n"]
    block += [f"{indent}    {stmt}\n" for stmt in eager]
    lines[anchor.end_lineno or anchor.lineno : anchor.end_lineno or anchor.lineno] = block
    return "".join(lines)


CATALOG: tuple[Rewrite, ...] = (
    Rewrite(
        "small_batch_eager_path",
        "run decode-sized batches (<= 4 rows) through eager PyTorch instead of launching the kernel",
        prior=1.0,
        batch_dependent=True,
        apply=_small_batch_eager_path,
    ),
    Rewrite(
        "multi_row_tile",
        "process 4 rows per program as a [ROWS, BLOCK_H] tile (fewer, fuller programs)",
        prior=0.95,
        batch_dependent=False,
        apply=_multi_row_tile,
    ),
    Rewrite(
        "batch_adaptive_tile",
        "narrow the reduction tile for small batches to put more programs in flight",
        prior=0.9,
        batch_dependent=True,
        apply=_batch_adaptive_tile,
    ),
    Rewrite(
        "single_pass",
        "keep the row in registers when one tile covers it (one load of x instead of two)",
        prior=0.85,
        batch_dependent=False,
        apply=_single_pass,
    ),
)
