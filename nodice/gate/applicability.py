"""Batch applicability: does the operator give a sample an output of its own at all?

Before a candidate is judged, its reference runs through batch contexts of the
dynamic stage's kind in float64: the target sample alone, then inside batches
of other sizes, at other positions, beside other batchmates. If the target's
output changes beyond float64 rounding, the *operator* couples the samples (a
norm over the whole tensor, training-mode BatchNorm, a mean over the batch)
and no candidate can be batch-invariant for it: the verdict is
``not_applicable``, never a violation blamed on the candidate. The reference
run twice alone answers the other way a sample can lack an output of its
own: a random draw (training-mode dropout).

Where the cause can be named, it is: a module of the reference in the mode it
runs in (BatchNorm, dropout), or a reduction in ``Model.forward`` over every
element or over the batch axis (read from its source). Otherwise the line
gives the context and how far the target's output moved.

The catalog's tasks give each sample its own output by construction (their
references are written per sample); a task built from a user's file
(``--reference``) is checked once per process, and so is a FlashInfer-Bench
definition's reference code. That one runs in the gate's dtype, not float64 (it
rounds to the dtypes it names, whatever it is fed): a sample moved by more than
twice the correctness tolerance is one no candidate can match both alone and in
its batch, which rounding within the tolerance never explains.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from nodice.errors import NodiceError, NotApplicableError
from nodice.gate import progress
from nodice.gate.correctness import has_own_correctness
from nodice.tasks.base import BIContext, Task

# A float64 reassociation moves a result by a few units of 2^-52 times the size of what is summed; a
# coupling through batch statistics moves it by the statistics' change (percents, typically).
RELATIVE_TOLERANCE = 1e-9

_CHECKED: dict[str, str] = {}  # task name -> "" (applicable) or why not

# Reductions that, called without a dim, reduce over every element (the batch axis included).
_REDUCTIONS = {
    "sum", "mean", "norm", "std", "var", "max", "min", "amax", "amin", "prod", "logsumexp",
    "std_mean", "var_mean", "median", "nansum", "nanmean", "count_nonzero", "all", "any",
}  # fmt: skip
_BATCH_NORMS = (torch.nn.modules.batchnorm._BatchNorm,)
_DROPOUTS = (torch.nn.modules.dropout._DropoutNd, torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)


@dataclass(frozen=True)
class _Probe:
    """How the check runs a task's reference, and what moves a sample's output beyond its rounding."""

    run: Callable[..., tuple[torch.Tensor, ...]]
    dtype: torch.dtype
    # float64 (a user's Model): exact up to reassociation. Otherwise the reference rounds as it does in
    # the gate, and moves within twice the task's tolerance there are rounding.
    exact: bool
    task: Task

    def moved(self, alone: tuple[torch.Tensor, ...], other: tuple[torch.Tensor, ...]) -> float:
        """How far ``other`` is from ``alone`` (relative to its size) where rounding cannot explain it; 0."""
        moved = _moved(alone, other)
        if self.exact:
            return moved if moved > RELATIVE_TOLERANCE else 0.0
        if not _apart(alone, other, self.task, self.dtype):
            return 0.0
        return moved or float("inf")  # beside an infinite element, no finite share of the size


def _probe(task: Task, device: torch.device, runs: bool) -> _Probe | None:
    """How ``task``'s reference is checked, or None where it is not (a catalog task's, per sample by
    construction)."""
    exact = getattr(task, "reference_exact", None)
    if exact is not None:
        return _Probe(exact, torch.float64, True, task)
    rounded = getattr(task, "reference_outputs", None)
    if rounded is None or not runs or has_own_correctness(task):
        # A definition's reference runs only where the candidate will (static analysis alone allocates
        # nothing); a distributional rule (sampling) compares no reference value.
        return None
    return _Probe(rounded, task.dtype_for(device), False, task)


def check_applicable(task: Task, device: torch.device, seed: int, runs: bool = True) -> bool:
    """Whether ``task``'s reference is one this check applies to (a user's file, a FlashInfer-Bench
    definition's code when ``runs``: stages that run the candidate follow); raises
    :class:`NotApplicableError` when it couples its samples."""
    probe = _probe(task, device, runs)
    if probe is None:
        return False
    if task.name not in _CHECKED:
        progress.stage("applicability")
        try:
            _CHECKED[task.name] = _coupling(task, probe, device, seed)
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the float64 batches go back to the device, not the cache
    why = _CHECKED[task.name]
    if why:
        raise NotApplicableError(why)
    return True


# Float64 batches are twice the size of fp32 ones: the largest batch tried keeps within these bytes.
_BATCH_BYTES = {"cpu": 64 << 20, "cuda": 4 << 30}


def _contexts(task: Task, device: torch.device, exact: bool = True) -> list[BIContext]:
    """A few of the dynamic stage's contexts: the smallest batches and the largest that fits, three
    positions. A reference run as the gate runs it (not ``exact``: a definition's, often a loop over
    requests in Python) goes no larger than the correctness stage's largest batch."""
    sizes = sorted({c.batch_size for c in task.contexts(device)})
    per_sample = getattr(task, "sample_bytes", None)
    if per_sample is not None:
        limit = _BATCH_BYTES["cpu" if device.type == "cpu" else "cuda"]
        sizes = [s for s in sizes if s * per_sample(torch.float64) <= limit] or sizes[:1]
    if not exact:
        most = max(task.correctness_batches(device))
        sizes = [s for s in sizes if s <= most] or sizes[:1]
    if not sizes:
        return []
    picked = sorted({sizes[0], sizes[min(1, len(sizes) - 1)], sizes[-1]})
    positions = ((-1, "last"), (0, "first"), (None, "middle"))
    out = []
    for i, b in enumerate(picked):
        pos, label = positions[i % len(positions)]
        out.append(BIContext(f"batch={b},{label}", b, b // 2 if pos is None else pos))
    return out


def _moved(alone: tuple[torch.Tensor, ...], other: tuple[torch.Tensor, ...]) -> float:
    """How far ``other`` is from ``alone``, relative to the size of ``alone`` (inf if shapes differ)."""
    worst = 0.0
    for a, b in zip(alone, other, strict=True):
        if a.shape != b.shape:
            return float("inf")
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return float("inf")
            continue
        if not a.numel():
            continue
        scale = max(float(a.abs().max()), float(b.abs().max()))
        diff = float((a - b).abs().max())
        if diff > 0:
            worst = max(worst, diff / scale)
    return worst


def _coupling(task: Task, probe: _Probe, device: torch.device, seed: int) -> str:
    """Why ``task``'s reference gives a sample no output of its own, or "" when it does."""
    dtype = probe.dtype
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, device, dtype)
    target = task.sample(problem, gen)
    name = getattr(task, "reference_name", "Model")

    def run(args: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        progress.step("harness")
        return tuple(o.detach().clone() for o in probe.run(*args))

    alone_args = task.compose(problem, [target], gen)
    try:
        alone = task.select(run(alone_args), 0, alone_args)
    except NotApplicableError:
        raise
    except Exception as exc:  # a reference that cannot run one sample alone (BatchNorm1d in training)
        if not probe.exact:
            raise  # a definition's reference failing is the definition's error, whatever the batch
        cause = _named_cause(task)
        shared = _maybe_shared(task)
        if shared and not cause:
            # A matmul's square B has the batch's length on axis 0 too: sliced as a batch, it breaks.
            return (
                f"{name} cannot run a batch of one sample ({_first_line(exc)}): inputs {shared} all have "
                "the batch's length on the batch axis, so each was sliced per sample; if one is an operand "
                "every sample shares (a matmul's B), it has no batch axis: make it a parameter of Model "
                "(built in __init__)"
            )
        return (
            f"{name} cannot run a batch of one sample ({_first_line(exc)}): its output for a sample depends "
            f"on other samples{f' ({cause})' if cause else ''}"
        )
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed ^ 0x5EED)
        again = task.select(run(alone_args), 0, alone_args)
    if probe.moved(alone, again):
        cause = _named_cause(task, random=True)
        return (
            f"{name} is random: the same sample alone gives another output on a second run"
            f"{f' ({cause})' if cause else ''}, so no output is the sample's own to compare"
        )
    for ctx in _contexts(task, device, probe.exact):
        pos = ctx.resolved_position()
        args = task.compose_around(problem, gen, ctx.batch_size, {pos: target})
        moved = probe.moved(alone, task.select(run(args), pos, args))
        if moved:
            cause = _named_cause(task)
            how = f"moves by {moved:.2g} of its size" if moved != float("inf") else "changes"
            return (
                f"{name} couples the samples of a batch: a sample's {str(dtype).removeprefix('torch.')} "
                f"output {how} in context "
                f"{ctx.name} against the sample alone"
                f"{f' ({cause})' if cause else ''}; no candidate can be batch-invariant for it"
            )
    return ""


def _apart(
    alone: tuple[torch.Tensor, ...], other: tuple[torch.Tensor, ...], task: Task, dtype: torch.dtype
) -> bool:
    """Whether no output within the task's tolerance of ``alone`` is within it of ``other`` too: some
    element apart by more than ``2·atol + rtol·(|a| + |b|)`` (or other shapes, other integers)."""
    tol = task.tolerance(dtype)
    for a, b in zip(alone, other, strict=True):
        if a.shape != b.shape:
            return True
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return True
            continue
        af, bf = a.double(), b.double()
        if bool(((af - bf).abs() > 2 * tol.atol + tol.rtol * (af.abs() + bf.abs())).any()):
            return True
    return False


def _maybe_shared(task: Task) -> str:
    """The names of the batched inputs when more than one is a tensor of two or more dimensions
    (one of them may be an operand the samples share), else ""."""
    ref = getattr(task, "ref", None)
    slots = [(i, s) for i, s in enumerate(getattr(ref, "inputs", ())) if s.batched and len(s.shape) >= 2]
    return ", ".join(f"{i} ({s.name})" for i, s in slots) if len(slots) > 1 else ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return (first if isinstance(exc, NodiceError) else f"{type(exc).__name__}: {first}")[:240]


def _named_cause(task: Task, random: bool = False) -> str:
    """What in the reference couples the samples, where it can be named; "" otherwise."""
    code = getattr(task, "reference_code", None)
    if code is not None:  # a definition's reference: the code is all there is to read
        return "" if random else _reduction_in(*code())
    model = getattr(task, "_model", None)
    ref = getattr(task, "ref", None)
    if model is None or ref is None:
        return ""
    try:
        module = model(torch.device("cpu"))
    except Exception:
        return ""
    for label, sub in module.named_modules():
        if not sub.training:
            continue
        if not random and isinstance(sub, _BATCH_NORMS):
            return (
                f"{type(sub).__name__} '{label}' in training mode normalises with statistics over the batch, "
                "as KernelBench's harness runs it; --eval-mode judges the inference form (running statistics)"
            )
        if isinstance(sub, _DROPOUTS) and getattr(sub, "p", 0) > 0:
            return (
                f"{type(sub).__name__} '{label}' in training mode draws a random mask, as KernelBench's "
                "harness runs it; --eval-mode judges the inference form (no dropout)"
            )
    return "" if random else _reduction_in_forward(ref.model_cls, ref.batch_axis)


def _reduction_in_forward(cls: type, axis: int) -> str:
    """A reduction in ``cls.forward`` over every element or over the batch axis, as ``file:line: code``."""
    try:
        lines, first = inspect.getsourcelines(cls.forward)  # type: ignore[attr-defined]
        file = inspect.getsourcefile(cls) or ""
    except (OSError, TypeError):
        return ""
    return _reduction_in("".join(lines), file, axis, first)


def _reduction_in(source: str, file: str, axis: int | None, first: int = 1) -> str:
    """A reduction in ``source`` (``file``'s, from line ``first``) over every element or over the batch
    axis (``None``: its place is not known), as ``file:line: code``."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr = node.func.attr
        if attr == "batch_norm" and any(k.arg == "training" and _is_true(k.value) for k in node.keywords):
            return _where(file, first, node, "batch_norm with training=True uses statistics over the batch")
        if attr not in _REDUCTIONS:
            continue
        # torch.sum(x, ...) carries the tensor as its first argument; x.sum(...) does not.
        on_module = isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "F")
        dims = node.args[1:] if on_module else node.args
        if attr == "norm":  # norm(x, p, dim): the first argument after the tensor is the order
            dims = dims[1:]
        dim = next((k.value for k in node.keywords if k.arg in ("dim", "axis")), dims[0] if dims else None)
        if dim is None:
            return _where(file, first, node, "reduces over every element, the batch axis included")
        if axis is not None and _covers(dim, axis):
            return _where(file, first, node, f"reduces over the batch axis ({axis})")
    return ""


def _is_true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _covers(dim: ast.AST, axis: int) -> bool:
    values = dim.elts if isinstance(dim, (ast.Tuple, ast.List)) else [dim]
    for v in values:
        if isinstance(v, ast.Constant) and isinstance(v.value, int) and v.value == axis:
            return True
        if isinstance(v, ast.Constant) and v.value is None:
            return True
    return False


def _where(file: str, first: int, node: ast.Call, what: str) -> str:
    from pathlib import Path

    line = first + node.lineno - 1
    return f"{Path(file).name}:{line}: {ast.unparse(node)} {what}"
