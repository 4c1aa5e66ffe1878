"""Precision chosen from the batch: a tensor whose dtype depends on the batch reaching a computation.

A value can choose the dtype (``x.to(torch.float64 if B < 8 else torch.float32)``), or a branch
can: ``if B >= 32: x = x.half()`` computes large batches in half precision and small ones in the
input's, each side within the task's tolerance, and a sample's bits then depend on its batch.
After a batch-dependent ``if`` whose two sides leave a tensor in different dtypes (converted on one
side only, or to different dtypes), the tensor carries that dependence; passed to a kernel launch
it is ``precision_from_batch``. A conversion is not always a change of values (an exact upcast
that the kernel makes anyway), so the finding carries its branch and the full gate settles it by
running both sides, as it settles a choice between algorithms (:mod:`nodice.gate.branches`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nodice.gate.static.branches import if_branch
from nodice.gate.static.values import Trace, V, extend

if TYPE_CHECKING:
    from nodice.gate.static.program import Analysis, ModuleInfo

# In a trace: the step after which a tensor's dtype depends on the batch.
DTYPE_FROM_BATCH = "a dtype that depends on the batch"


def dtype_step(trace: Trace, step: str) -> Trace:
    """``trace`` ending on ``step``, which says where the dtype came to depend on the batch: it takes
    the place of a last step on the same line (the choice of ``torch.float16 if B >= 32 else …``)."""
    if trace and trace[-1].split(": ", 1)[0] == step.split(": ", 1)[0]:
        return (*trace[:-1], step)
    return extend(trace, step) or (step,)


def dtype_sides(a: V, b: V) -> str:
    """The two dtypes a batch-dependent choice leaves a tensor in, as a trace step says them."""
    return " or ".join(sorted(d or "as given" for d in (a.dtype, b.dtype)))


class PrecisionMixin:
    an: Analysis
    mod: ModuleInfo

    if TYPE_CHECKING:

        def step(self, node: ast.AST, note: str = "") -> str: ...

    def dtype_branch(self, s: ast.If, ctrl: Trace, env_body: dict[str, V], env_else: dict[str, V]) -> None:
        """Tensors the two sides of a batch-dependent ``if`` leave in different dtypes: their dtype
        (and so their values' precision) depends on the batch after it."""
        for name in sorted(env_body.keys() & env_else.keys()):
            a, b = env_body[name], env_else[name]
            if a.kind != "tensor" or b.kind != "tensor" or a.dtype == b.dtype:
                continue
            step = self.step(s, f"batch-dependent branch: {name} is {dtype_sides(a, b)}, {DTYPE_FROM_BATCH}")
            self.an.dtype_branches.setdefault(step, if_branch(self.mod, s))
            trace = dtype_step(ctrl, step)  # the branch's own step, told what it chose
            env_body[name], env_else[name] = a.retrace(trace), b.retrace(trace)

    def precision_sink(self, param: str, v: V, kernel: str, node: ast.Call) -> None:
        """A tensor whose dtype depends on the batch passed to a kernel launch."""
        if v.kind != "tensor" or v.taint is None:
            return
        mark = next((step for step in v.taint if DTYPE_FROM_BATCH in step), None)
        if mark is None:
            return
        self.an.report(
            "precision_from_batch",
            self.mod,
            node,
            param,
            f"{param} of {kernel} is a tensor whose dtype depends on the batch: the kernel computes at "
            "a precision the batch chose",
            v.taint,
            self.step(node, f"passed as {param} to {kernel}"),
            branch=self.an.dtype_branches.get(mark),
        )
