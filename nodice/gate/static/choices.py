"""Algorithm selection: does a batch-dependent branch run a different computation on its two sides?

Two sides differ when they call different kernels or compute functions (allocation,
views and bookkeeping do not count). Two launches of kernels that reduce alike
(same reduction signature, same reduction-shaping constants) count as one
algorithm: a persistent variant for large batches computes every row as the
one-program-per-row kernel does.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nodice.gate.static.triton_values import dotted
from nodice.gate.static.values import Trace, V

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo

# Calls that do not decide what is computed: allocation, views, conversions, bookkeeping.
BENIGN_CALLS = frozenset(
    [
        "empty",
        "empty_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_empty",
        "new_zeros",
        "new_ones",
        "new_full",
        "empty_strided",
        "view",
        "reshape",
        "contiguous",
        "float",
        "half",
        "bfloat16",
        "to",
        "clone",
        "detach",
        "unsqueeze",
        "squeeze",
        "flatten",
        "expand",
        "expand_as",
        "view_as",
        "reshape_as",
        "size",
        "stride",
        "numel",
        "dim",
        "item",
        "tolist",
        "copy_",
        "fill_",
        "zero_",
        "cat",
        "stack",
        "pad",
        "narrow",
        "split",
        "chunk",
        "len",
        "max",
        "min",
        "int",
        "range",
        "print",
        "isinstance",
        "tuple",
        "list",
        "dict",
        "cdiv",
        "next_power_of_2",
        "ceil",
        "floor",
        "log2",
        "ValueError",
        "RuntimeError",
        "TypeError",
        "AssertionError",
        "NotImplementedError",
        "append",
        "get",
        "format",
        "str",
        "abs",
        "round",
        "enumerate",
        "zip",
        "get_device_properties",
        "is_contiguous",
        "data_ptr",
        "element_size",
        "t",
        "permute",
        "transpose",
        "Config",
        "type",
        "cuda",
        "cpu",
        "warn",
        "warning",
        "device",
        "current_device",
        "synchronize",
        "set_device",
    ]
)


# Triton's default when a launch does not say.
_DEFAULT_NUM_WARPS = 4


class ChoiceMixin:
    an: Analysis
    mod: ModuleInfo
    scope_body: list[ast.stmt]

    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

        def expr(self, node: ast.AST | None) -> V: ...

    def algorithm_choice(self, node: ast.If, trace: Trace, a: list[ast.stmt], b: list[ast.stmt]) -> None:
        ca, cb = _compute_calls(a), _compute_calls(b)
        if ca == cb or not (ca or cb):
            return
        if not b and ca <= _compute_calls([s for s in self.scope_body if s is not node]):
            return  # the same work done for another part of the batch (a tail, a chunk)
        if self.equivalent_launches(a, b, ca, cb):
            return

        def fmt(c: frozenset[str]) -> str:
            return "{" + ", ".join(sorted(c)) + "}" if c else "nothing"

        self.an.report(
            "algorithm_selection_by_batch",
            self.mod,
            node,
            "ALGORITHM",
            f"a batch-dependent condition chooses between {fmt(ca)} and {fmt(cb)}",
            trace,
            self.step(node, "batch-dependent branch chooses the algorithm"),
        )

    def equivalent_launches(
        self, a: list[ast.stmt], b: list[ast.stmt], ca: frozenset[str], cb: frozenset[str]
    ) -> bool:
        """Both sides launch kernels that reduce alike, and otherwise compute the same."""
        if {c for c in ca if not c.startswith("launch ")} != {c for c in cb if not c.startswith("launch ")}:
            return False
        la, lb = _launches(a), _launches(b)
        if not la or len(la) != len(lb):
            return False
        return all(self._same_reduction(x, y) for x, y in zip(la, lb, strict=True))

    def _same_reduction(self, x: ast.Call, y: ast.Call) -> bool:
        kx = self.expr(x.func.value) if isinstance(x.func, ast.Subscript) else V()
        ky = self.expr(y.func.value) if isinstance(y.func, ast.Subscript) else V()
        if kx.kind != "kernel" or ky.kind != "kernel":
            return False
        ix, iy = self.an.kernel_info(kx.ref), self.an.kernel_info(ky.ref)
        if not ix.signature or ix.signature != iy.signature:
            return False
        shaping = (ix.reduction_params | iy.reduction_params) - {"pid", "nprog"}
        return _constants(x, shaping) == _constants(y, shaping)


def _constants(call: ast.Call, names: set[str]) -> dict[str, object]:
    out: dict[str, object] = {"num_warps": _DEFAULT_NUM_WARPS}
    for k in call.keywords:
        if k.arg is not None and (k.arg in names or k.arg == "num_warps"):
            out[k.arg] = k.value.value if isinstance(k.value, ast.Constant) else ast.dump(k.value)
    return out


def _launches(body: list[ast.stmt]) -> list[ast.Call]:
    out = []
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
                out.append(n)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))


def _compute_calls(body: list[ast.stmt]) -> frozenset[str]:
    """What a block computes, by the names of the calls that are not allocation or bookkeeping."""
    out: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Subscript):
                out.add("launch " + (dotted(node.func.value) or "kernel"))
            else:
                name = dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")
                last = name.split(".")[-1]
                if last and last not in BENIGN_CALLS:
                    out.add(last if isinstance(node.func, ast.Attribute) else name)
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(out)
