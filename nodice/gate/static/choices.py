"""Algorithm selection: does a batch-dependent branch run a different computation on its two sides?

Two sides differ when they call different kernels or compute functions (allocation,
views and bookkeeping do not count). A call of one of the candidate's own functions that, through
every function it calls in turn, only does such bookkeeping and host arithmetic (a wave count, a
tile rule: no launch, no library compute call, no ``@``, no ``torch.*`` call or tensor method)
is bookkeeping too, as the same arithmetic written inline is; one that launches or computes
anything stays its own algorithm. An ``except`` branch run for the batches on which its ``try``
body raises is a branch too: it is a choice when it computes what the tried path does not.
Two launches of kernels that reduce alike (same reduction signature, same reduction-shaping
constants) count as one algorithm: a persistent variant for large batches computes every row as
the one-program-per-row kernel does. Two sides that call the same functions but convert to a
narrower dtype (or a wider one than fp32, or enter ``autocast``) on one side only compute at a
precision the batch chose: ``precision_from_batch``, settled like a choice by running both sides.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from nodice.gate.static.branches import if_branch, try_branch
from nodice.gate.static.torch_dtypes import CONVERSION_METHODS, converted_to
from nodice.gate.static.triton_kernels import is_jit
from nodice.gate.static.triton_values import dotted
from nodice.gate.static.values import NO_CONST, Trace, V

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

        def lookup(self, name: str) -> V | None: ...

        def expr(self, node: ast.AST | None) -> V: ...

    def algorithm_choice(self, node: ast.If, trace: Trace, a: list[ast.stmt], b: list[ast.stmt]) -> None:
        ca, cb = self.compute_calls(a), self.compute_calls(b)
        if not (ca or cb):
            return
        if ca == cb:
            # The same kernels on both sides: still two algorithms when one of them is launched
            # with other reduction-shaping constants on one side (``BLOCK_H=256`` for small
            # batches, 1024 otherwise, written as literals in each branch).
            differ = self.reshaped_launches(a, b)
            if differ:
                self.an.report(
                    "algorithm_selection_by_batch",
                    self.mod,
                    node,
                    "ALGORITHM",
                    f"a batch-dependent condition launches {differ} with other reduction-shaping constants",
                    trace,
                    self.step(node, "batch-dependent branch chooses the kernel's reduction"),
                    branch=if_branch(self.mod, node),
                )
                return
            precisions = self.precisions(a) ^ self.precisions(b)
            if precisions:
                self.an.report(
                    "precision_from_batch",
                    self.mod,
                    node,
                    "PRECISION",
                    f"a batch-dependent condition computes {_fmt(ca)} with a conversion to "
                    f"{', '.join(sorted(precisions))} on one side only: at a precision the batch chose",
                    trace,
                    self.step(node, "batch-dependent branch chooses the precision"),
                    branch=if_branch(self.mod, node),
                )
            return
        if not b and ca <= self.compute_calls([s for s in self.scope_body if s is not node]):
            return  # the same work done for another part of the batch (a tail, a chunk)
        if self.equivalent_launches(a, b, ca, cb):
            return

        self.an.report(
            "algorithm_selection_by_batch",
            self.mod,
            node,
            "ALGORITHM",
            f"a batch-dependent condition chooses between {_fmt(ca)} and {_fmt(cb)}",
            trace,
            self.step(node, "batch-dependent branch chooses the algorithm"),
            branch=if_branch(self.mod, node),
        )

    def precisions(self, body: list[ast.stmt]) -> frozenset[str]:
        """The precisions other than fp32 a block converts to (``x.half()``, ``x.to(torch.bfloat16)``,
        ``.double()``), and ``autocast`` where it enters one; a dtype it cannot name does not count."""
        out: set[str] = set()
        for n in _walk(body):
            called = (
                n.context_expr.func
                if isinstance(n, ast.withitem) and isinstance(n.context_expr, ast.Call)
                else None
            )
            if called is not None and (dotted(called) or "").split(".")[-1] == "autocast":
                out.add("autocast")
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                continue
            if n.func.attr not in CONVERSION_METHODS:
                continue  # only a conversion's arguments are worth evaluating
            args = [self.expr(a) for a in n.args if not isinstance(a, ast.Starred)]
            kwargs = {k.arg: self.expr(k.value) for k in n.keywords if k.arg}
            to = converted_to(n.func.attr, args, kwargs)
            if to is not None and to.startswith(("float", "bfloat")) and to != "float32":
                out.add(to)
        return frozenset(out)

    def handler_choice(
        self,
        node: ast.Try,
        trace: Trace,
        tried: list[ast.stmt],
        handled: list[ast.stmt],
        handler: ast.ExceptHandler,
    ) -> None:
        """A ``try`` whose body raises for some batches only: does its handler compute anything the
        tried path does not? (The body may have run up to the raise, so the tried path's own calls
        are on both sides; a handler that only skips work is not told apart.)"""
        ct, ch = self.compute_calls(tried), self.compute_calls(handled)
        new = {c for c in ch - ct if not c.startswith("launch ")}
        launches = _launches(tried)
        unmatched = [y for y in _launches(handled) if not any(self._same_reduction(x, y) for x in launches)]
        if not new and not unmatched:
            return
        self.an.report(
            "algorithm_selection_by_batch",
            self.mod,
            node,
            "ALGORITHM",
            f"an exception raised for some batches only chooses between {_fmt(ct)} and {_fmt(ch)}",
            trace,
            self.step(node, "the handler runs another algorithm"),
            branch=try_branch(self.mod, node, handler),
        )

    def compute_calls(self, body: list[ast.stmt]) -> frozenset[str]:
        """What a block computes, less the calls of the candidate's host-arithmetic helpers."""
        local = _local_defs(self.scope_body) | _local_defs(body)

        def arithmetic(name: str) -> bool:
            fn: Helper | None = local.get(name)
            mod = self.mod
            if fn is None:
                v = self.lookup(name)
                if v is None or v.kind != "func":
                    return False
                fn, mod = v.ref.node, v.ref.module
            return _arithmetic_only(fn, mod, local, set())

        return _compute_calls(body, arithmetic)

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

    def reshaped_launches(self, a: list[ast.stmt], b: list[ast.stmt]) -> str:
        """A kernel both sides launch whose reduction-shaping constants take a value on one side
        that no launch of it on the other side takes; "" if there is none, or if a constant is not
        known here (a batch value is the launch rules' to judge). How many launches each side makes
        (a batch cut into chunks) does not count."""
        sides: list[dict[str, set[tuple[tuple[str, object], ...]]]] = []
        for body in (a, b):
            seen: dict[str, set[tuple[tuple[str, object], ...]]] = {}
            for call in _launches(body):
                k = self.expr(call.func.value) if isinstance(call.func, ast.Subscript) else V()
                if k.kind != "kernel":
                    return ""
                shaping = set(self.an.kernel_info(k.ref).reduction_params) - {"pid", "nprog"}
                consts: dict[str, object] = {"num_warps": _DEFAULT_NUM_WARPS}
                for kw in call.keywords:
                    if kw.arg is None or (kw.arg not in shaping and kw.arg != "num_warps"):
                        continue
                    v = self.expr(kw.value)
                    if v.taint is not None or v.const is NO_CONST:
                        return ""
                    consts[kw.arg] = v.const
                seen.setdefault(k.ref.name, set()).add(tuple(sorted(consts.items(), key=lambda kv: kv[0])))
            sides.append(seen)
        for name in sorted(set(sides[0]) & set(sides[1])):
            if sides[0][name] != sides[1][name]:
                return name
        return ""

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


def _fmt(calls: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(calls)) + "}" if calls else "nothing"


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


def _compute_calls(body: list[ast.stmt], arithmetic: Callable[[str], bool] | None = None) -> frozenset[str]:
    """What a block computes, by the names of the calls that are not allocation or bookkeeping
    (nor, where ``arithmetic`` says so of a called name, of a host-arithmetic helper)."""
    out: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda | ast.Raise):
            continue  # definitions run nothing yet; the exception a ``raise`` builds computes nothing
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Subscript):
                out.add("launch " + (dotted(node.func.value) or "kernel"))
            else:
                name = dotted(node.func) or (node.func.attr if isinstance(node.func, ast.Attribute) else "")
                last = name.split(".")[-1]
                if isinstance(node.func, ast.Name) and arithmetic is not None and arithmetic(name):
                    pass
                elif last and last not in BENIGN_CALLS:
                    out.add(last if isinstance(node.func, ast.Attribute) else name)
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(out)


# Helper functions followed for one call before it counts as computing (a guard, not a limit
# real tile choosers reach).
_MAX_HELPERS = 16

Helper = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _local_defs(body: list[ast.stmt]) -> dict[str, Helper]:
    """Functions a block defines (in its own scope: not those nested in another function)."""
    out: dict[str, Helper] = {}
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not (isinstance(node, ast.FunctionDef) and is_jit(node)):
                out.setdefault(node.name, node)
            continue
        if isinstance(node, ast.stmt):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _arithmetic_only(fn: Helper, mod: ModuleInfo, outer: dict[str, Helper], seen: set[int]) -> bool:
    """Whether a helper only does bookkeeping and host arithmetic, and so do the helpers it calls."""
    if isinstance(fn, ast.FunctionDef) and is_jit(fn):
        return False
    if id(fn) in seen:
        return True  # recursion: the other calls decide
    if len(seen) >= _MAX_HELPERS:
        return False
    seen.add(id(fn))
    body: list[ast.stmt] = [ast.Expr(fn.body)] if isinstance(fn, ast.Lambda) else fn.body
    if any(_tensor_work(n) for n in _walk(body)):
        return False
    defs = outer | _local_defs(body)

    def arithmetic(name: str) -> bool:
        callee: Helper | None = defs.get(name)
        callee_mod = mod
        if callee is None:
            v = mod.env.get(name)
            if v is None or v.kind != "func":
                return False
            callee, callee_mod = v.ref.node, v.ref.module
            defs_there: dict[str, Helper] = {}
        else:
            defs_there = defs
        return _arithmetic_only(callee, callee_mod, defs_there, seen)

    return not _compute_calls(body, arithmetic)


# Benign calls that only a tensor answers: a helper using them works on tensors, not host integers.
_TENSOR_METHODS = frozenset(
    [
        "to", "float", "half", "bfloat16", "view", "reshape", "contiguous", "clone", "copy_", "fill_",
        "zero_", "unsqueeze", "squeeze", "flatten", "expand", "expand_as", "view_as", "reshape_as",
        "narrow", "split", "chunk", "permute", "transpose", "t", "detach", "new_empty", "new_zeros",
        "new_ones", "new_full", "cuda", "cpu",
    ]
)  # fmt: skip


def _tensor_work(node: ast.AST) -> bool:
    """``a @ b``, a ``torch.*`` call, a tensor method, ``x[..., None]``: the helper touches tensors."""
    if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
        return True
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if name.split(".")[0] == "torch":
            return True
        return isinstance(node.func, ast.Attribute) and node.func.attr in _TENSOR_METHODS
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis) for e in parts)
    return False


def _walk(body: list[ast.stmt]) -> Iterator[ast.AST]:
    for s in body:
        yield from ast.walk(s)
