"""Rule ``library-call``: the candidate must compute the operation, not call the reference or a library.

Caught twice: statically (the AST names a forbidden function, the ``@``
operator in a GEMM, or imports ``nodice`` or a kernel library), and at run time
(a torch function mode watches every torch call the candidate makes, so
``getattr(torch, "m" + "m")`` and ``torch.ops.aten.mm.default`` are seen too;
the task's ``reference`` method carries a tripwire). A dispatch mode would also
see aten ops issued from C++, but entering one imports torch's compiler stack
(seconds per worker); the function-level names cover the same entry points.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from torch.overrides import TorchFunctionMode

from nodice.tasks.base import Task

RULE = "library-call"
DESCRIPTION = "calls the task's reference or a library implementation of the whole operation"


@dataclass(frozen=True)
class ForbiddenOps:
    """What a candidate for one task may not call: torch functions, aten ops, importable libraries."""

    functions: frozenset[str] = frozenset()
    aten_ops: frozenset[str] = frozenset()
    modules: frozenset[str] = frozenset()
    matmul_operator: bool = False


_NORM = ForbiddenOps(
    functions=frozenset({"rms_norm", "layer_norm", "group_norm"}),
    aten_ops=frozenset({"rms_norm", "_fused_rms_norm", "native_layer_norm", "layer_norm"}),
    modules=frozenset({"apex", "liger_kernel", "flashinfer", "vllm", "sgl_kernel", "transformer_engine"}),
)
_GEMM = ForbiddenOps(
    functions=frozenset(
        {
            "mm",
            "matmul",
            "bmm",
            "addmm",
            "addbmm",
            "baddbmm",
            "linear",
            "einsum",
            "tensordot",
            "inner",
            "mv",
            "addmv",
            "dot",
            "chain_matmul",
            "multi_dot",
            "_scaled_mm",
            "__matmul__",
            "__rmatmul__",
        }
    ),
    aten_ops=frozenset(
        {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv", "dot", "_scaled_mm"}
    ),
    modules=frozenset(
        {"cublas", "cutlass", "deep_gemm", "flashinfer", "vllm", "sgl_kernel", "transformer_engine"}
    ),
    matmul_operator=True,
)
_ATTENTION = ForbiddenOps(
    functions=frozenset({"scaled_dot_product_attention", "flex_attention", "multi_head_attention_forward"}),
    aten_ops=frozenset(
        {
            "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_attention_math",
            "_flash_attention_forward",
            "_efficient_attention_forward",
            "_cudnn_attention_forward",
        }
    ),
    modules=frozenset(
        {
            "flash_attn",
            "flash_attn_interface",
            "flash_mla",
            "flashinfer",
            "xformers",
            "vllm",
            "sgl_kernel",
            "transformer_engine",
        }
    ),
)
_MOE = ForbiddenOps(
    functions=frozenset({"_grouped_mm"}),
    aten_ops=frozenset({"_grouped_mm"}),
    modules=frozenset({"flashinfer", "vllm", "sgl_kernel", "deep_gemm"}),
)
_BY_FAMILY = {"normalization": _NORM, "gemm": _GEMM, "attention": _ATTENTION, "moe": _MOE}
# Every candidate: the harness and the task's reference live in nodice.
_ALWAYS_MODULES = frozenset({"nodice"})


def forbidden_for(task: Task) -> ForbiddenOps:
    ops = _BY_FAMILY.get(task.family, ForbiddenOps())
    return ForbiddenOps(ops.functions, ops.aten_ops, ops.modules | _ALWAYS_MODULES, ops.matmul_operator)


# ---- static ------------------------------------------------------------------


def _root_module(name: str) -> str:
    return name.split(".")[0]


# Method names distinctive enough to flag on any object (``x.mm(w)``); ``dot`` or ``linear`` are
# flagged only when reached through torch, so Triton's ``tl.dot`` stays legal.
_DISTINCTIVE = frozenset(
    {
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "matmul",
        "_scaled_mm",
        "rms_norm",
        "scaled_dot_product_attention",
        "flex_attention",
        "_grouped_mm",
    }
)


def _chain_root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _torch_aliases(tree: ast.AST) -> set[str]:
    """Names the candidate binds to torch or one of its submodules."""
    names = {"torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _root_module(a.name) == "torch":
                    names.add(a.asname or _root_module(a.name))
        elif isinstance(node, ast.ImportFrom) and node.module and _root_module(node.module) == "torch":
            names.update(a.asname or a.name for a in node.names)
    return names


def static_check(tree: ast.AST, task: Task) -> tuple[int, str] | None:
    """``(line, detail)`` of the first forbidden call or import in the candidate's AST."""
    ops = forbidden_for(task)
    torch_names = _torch_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _root_module(alias.name) in ops.modules:
                    return node.lineno, f"imports {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _root_module(node.module) in ops.modules:
                return node.lineno, f"imports from {node.module}"
            if _root_module(node.module) == "torch":
                bad = [a.name for a in node.names if a.name in ops.functions]
                if bad:
                    return node.lineno, f"imports {bad[0]} from {node.module}"
        elif isinstance(node, ast.Attribute) and node.attr in ops.functions:
            root = _chain_root(node)
            if root in torch_names or (node.attr in _DISTINCTIVE and root not in ("tl", "triton")):
                return node.lineno, f"uses .{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # getattr(F, "rms_norm") and importlib.import_module("flash_attn"): a bare name as a string.
            named = node.value in ops.functions & _DISTINCTIVE or _root_module(node.value) in ops.modules
            if named and (node.value.isidentifier() or "." in node.value):
                return node.lineno, f"names {node.value!r}"
        elif (
            ops.matmul_operator
            and isinstance(node, (ast.BinOp, ast.AugAssign))
            and isinstance(node.op, ast.MatMult)
        ):
            return node.lineno, "uses the @ operator (a library matmul)"
    return None


# ---- run time ----------------------------------------------------------------


@dataclass
class LibraryWatch:
    """Records the first forbidden call made while a candidate's call is being watched."""

    ops: ForbiddenOps
    hits: list[str] = field(default_factory=list)
    active: bool = False

    def record(self, what: str) -> None:
        if self.active and not self.hits:
            self.hits.append(what)


class _FunctionWatcher(TorchFunctionMode):
    def __init__(self, watch: LibraryWatch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # torch.ops.aten.mm.default is named "mm.default"; the packet torch.ops.aten.mm "mm".
        name = getattr(func, "__name__", "").split(".")[0]
        if name in self.watch.ops.functions or name in self.watch.ops.aten_ops:
            self.watch.record(f"torch {name}")
        return func(*args, **(kwargs or {}))


_current: LibraryWatch | None = None


@contextmanager
def watching(watch: LibraryWatch) -> Iterator[LibraryWatch]:
    """Watch the torch calls made inside the block (the candidate's own call, nothing else)."""
    global _current
    watch.active, _current = True, watch
    try:
        with _FunctionWatcher(watch):
            yield watch
    finally:
        watch.active, _current = False, None


def install_reference_tripwire(task: Task) -> None:
    """Make ``task.reference`` report itself when the candidate calls it (inside :func:`watching`)."""
    cls = type(task)
    original = cls.reference
    if getattr(original, "_nodice_tripwire", False):
        return

    def reference(self: Task, *args: Any) -> Any:
        if _current is not None and _current.active:
            _current.record(f"the task's reference ({cls.__module__}.{cls.__name__}.reference)")
        return original(self, *args)

    reference._nodice_tripwire = True  # type: ignore[attr-defined]
    reference.__doc__ = original.__doc__
    cls.reference = reference  # type: ignore[method-assign]


def new_library_modules(before: set[str], after: set[str], task: Task) -> list[str]:
    """Forbidden libraries that appeared in ``sys.modules`` while the candidate was imported."""
    ops = forbidden_for(task)
    return sorted(m for m in after - before if _root_module(m) in ops.modules and "." not in m)
