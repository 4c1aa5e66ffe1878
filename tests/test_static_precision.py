"""A precision chosen from the batch: inputs cast to fp16 under ``if B >= 32:`` before a launch.

Both sides stay within the task's tolerance, so only the batch decides a sample's bits. The static
stage reports the tensor whose dtype the branch chose where it reaches a kernel
(``precision_from_batch``, settled by running both sides in the full gate); a cast for every batch
size is not batch-dependent (the precision guard may still call it a downgrade: another verdict).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import nodice
from nodice.evaluation.guards import precision_downgrade
from nodice.gate.branches import confirmable
from nodice.gate.static import run_static
from nodice.tasks import get_task

HEAD = """
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    m = offs < hidden
    x = tl.load(x_ptr + row * hidden + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / hidden + eps)
    tl.store(y_ptr + row * hidden + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
LAUNCH = """
    _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=triton.next_power_of_2(hidden))
    return y
"""

HALF_FOR_LARGE = """
    if batch >= 32:
        # Large batches are bandwidth-bound: read half the bytes.
        x = x.to(torch.float16)
        weight = weight.to(torch.float16)
"""
HALF_ALWAYS = """
    x = x.to(torch.float16)
    weight = weight.to(torch.float16)
"""
CHOSEN_BY_VALUE = """
    x = x.to(torch.float16 if batch >= 32 else x.dtype)
"""
LAYOUT_FOR_LARGE = """
    if batch >= 32:
        x = x.contiguous()
"""
# On CPU the inputs are float32 already: the same bits on both sides, which running them shows.
FLOAT_FOR_LARGE = HALF_FOR_LARGE.replace("x.to(torch.float16)", "x.float()").replace(
    "weight.to(torch.float16)", "weight.float()"
)


def _write(tmp_path: Path, prologue: str, name: str = "cand.py") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + textwrap.indent(textwrap.dedent(prologue), "    ") + LAUNCH)
    return path


def test_a_cast_to_half_for_large_batches_before_a_launch_is_found(tmp_path: Path) -> None:
    violations, unresolved = run_static(_write(tmp_path, HALF_FOR_LARGE), get_task("rmsnorm"))
    assert unresolved == []
    assert [(f.rule, f.mechanism, f.protected) for f in violations] == [
        ("precision_from_batch", "algorithm_selection", "x_ptr"),
        ("precision_from_batch", "algorithm_selection", "w_ptr"),
    ]
    assert "if batch >= 32:" in violations[0].path[1] and "float16" in violations[0].path[1]
    # The branch is located, so the full gate can settle it by running both sides.
    assert all(confirmable(f) for f in violations)


def test_a_dtype_chosen_by_a_value_before_a_launch_is_found(tmp_path: Path) -> None:
    violations, _ = run_static(_write(tmp_path, CHOSEN_BY_VALUE), get_task("rmsnorm"))
    assert [f.rule for f in violations] == ["precision_from_batch"]
    assert not confirmable(violations[0])  # no branch to run both sides of


@pytest.mark.parametrize("prologue", [HALF_ALWAYS, LAYOUT_FOR_LARGE], ids=["half_always", "layout_only"])
def test_a_cast_for_every_batch_or_a_branch_without_a_cast_passes(tmp_path: Path, prologue: str) -> None:
    assert run_static(_write(tmp_path, prologue), get_task("rmsnorm")) == ([], [])


def test_pure_torch_half_for_large_batches_is_found(tmp_path: Path) -> None:
    path = tmp_path / "cand.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch


            def kernel(x, weight, eps):
                batch, hidden = x.shape
                dtype = x.dtype
                if batch >= 32:
                    x = x.half()
                xf = x.float()
                y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
                return y.to(dtype)
            """
        )
    )
    violations, _ = run_static(path, get_task("rmsnorm"))
    assert [f.rule for f in violations] == ["batch_value_in_kernel_output"]
    assert any("float16, a dtype that depends on the batch" in step for step in violations[0].path)


def test_the_full_gate_rejects_the_half_branch_and_clears_an_exact_upcast(tmp_path: Path) -> None:
    half = nodice.check(_write(tmp_path, HALF_FOR_LARGE, "half.py"), "rmsnorm", device="cpu", seed=1)
    assert half.verdict == "bi_violation"
    assert half.reason.startswith("dynamic:") and half.mismatch is not None
    assert half.mismatch.context["batch_size"] >= 32
    upcast = nodice.check(_write(tmp_path, FLOAT_FOR_LARGE, "upcast.py"), "rmsnorm", device="cpu", seed=1)
    assert upcast.verdict == "pass", upcast.reason
    assert [f.severity for f in upcast.findings] == ["cleared", "cleared"]


HALF_BY_EXPRESSION = """
    x = x.to(torch.float16) if batch >= 32 else x
"""
FLOAT_BY_EXPRESSION = HALF_BY_EXPRESSION.replace("x.to(torch.float16)", "x.float()")


def test_a_conditional_expression_is_settled_like_the_branch(tmp_path: Path) -> None:
    """``x.half() if batch >= 32 else x`` before a launch carries its expression as a branch: the full
    gate runs both sides, rejects the half one and clears an upcast that changes no bits."""
    violations, _ = run_static(_write(tmp_path, HALF_BY_EXPRESSION), get_task("rmsnorm"))
    assert [(f.rule, f.protected) for f in violations] == [("precision_from_batch", "x_ptr")]
    assert all(confirmable(f) for f in violations)
    half = nodice.check(_write(tmp_path, HALF_BY_EXPRESSION, "half.py"), "rmsnorm", device="cpu", seed=1)
    assert half.verdict == "bi_violation" and half.reason.startswith("dynamic:")
    upcast = nodice.check(_write(tmp_path, FLOAT_BY_EXPRESSION, "upcast.py"), "rmsnorm", device="cpu", seed=1)
    assert upcast.verdict == "pass", upcast.reason
    assert [f.severity for f in upcast.findings] == ["cleared"]


def test_a_cast_for_every_batch_is_the_guards_verdict_not_the_static_stage(tmp_path: Path) -> None:
    """Not batch-dependent, so no static finding; the precision guard calls it a downgrade."""
    from nodice.loader import load_kernel

    task = get_task("rmsnorm")
    path = _write(tmp_path, HALF_ALWAYS)
    assert run_static(path, task) == ([], [])
    dev, dtype = torch.device("cpu"), torch.float32
    gen = torch.Generator().manual_seed(0)
    problem = task.problem(gen, dev, dtype)
    args = task.compose(problem, [task.sample(problem, gen) for _ in range(4)], gen)
    fn = load_kernel(path, "kernel", task, dev, dtype).fn
    downgrade = precision_downgrade.judge(task, args, fn(*args), task.reference(*args), dtype)
    assert downgrade is not None and "below float32 precision" in downgrade


# A KernelBench-style module: half precision chosen by a conditional expression, an accumulator that
# starts as ``None``, and an early return through a library module the analyzer does not follow.
CONDITIONAL_HALF = """
import torch
import torch.nn as nn


TAPS = 3


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if TAPS == 0:  # a pinned-off path: cuBLAS on the batch never runs
            return self.proj(x)
        low = x.shape[0] >= 4
        xx = {chosen}
        out = None
        for j in range(TAPS):
            term = xx * (j + 1)
            out = term if out is None else out + term
        return out.to(x.dtype)
"""


@pytest.mark.parametrize(
    ("chosen", "found"),
    [
        ("x.half() if low else x", True),
        ("x if low else x.half()", True),
        ("x.half() if low else x.half()", False),
        ("x if low else x.clone()", False),
    ],
)
def test_a_dtype_chosen_by_a_conditional_expression_reaches_the_output(
    tmp_path: Path, chosen: str, found: bool
) -> None:
    """``x.half() if B >= 4 else x`` computes large batches at half precision: the values the module
    returns depend on the batch. The same choice between tensors of one dtype (a cast for every
    batch, a copy) is not a precision the batch chose."""
    path = tmp_path / "cand.py"
    path.write_text(CONDITIONAL_HALF.replace("{chosen}", chosen))
    violations, unresolved = run_static(path, get_task("rmsnorm"), entry="ModelNew")
    assert unresolved == []
    if not found:
        assert violations == []
        return
    assert [f.rule for f in violations] == ["batch_value_in_kernel_output"]
    path_text = "\n".join(violations[0].path)
    assert "a tensor as given or float16, a dtype that depends on the batch" in path_text
    assert "out = term if out is None else out + term" in path_text


def test_an_incorrect_side_of_a_batch_choice_is_named_in_the_correctness_verdict(tmp_path: Path) -> None:
    """A half-precision side that the correctness batches reach and that misses the tolerance: the
    verdict is ``incorrect`` (before dynamic validation runs), and its reason names the batch-dependent
    choice still to settle, the likely cause; a candidate without one gets the bare reason."""
    lossy = HALF_FOR_LARGE.replace("batch >= 32", "batch >= 4")
    half = nodice.check(_write(tmp_path, lossy, "half.py"), "rmsnorm", device="cpu", seed=1)
    assert half.verdict == "incorrect", half.reason
    assert half.reason.startswith("correctness: batch=5:")
    assert "the batch chooses the path at line 22 (precision_from_batch:" in half.reason
    assert [s.name for s in half.stages][-1] == "correctness"
    always = nodice.check(_write(tmp_path, HALF_ALWAYS, "always.py"), "rmsnorm", device="cpu", seed=1)
    assert always.verdict == "incorrect", always.reason
    assert "the batch chooses" not in always.reason
