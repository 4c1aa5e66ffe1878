"""A kernel setting the batch chooses, reaching only the elements the kernel stores
(``elementwise_value_from_batch``): static analysis names it, and the full gate clears it only
after dynamic validation launched the kernel with two settings and every tracked sample kept its
bits. A setting computed from the batch (not chosen), or one that shapes a reduction, stays a
static violation."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from triton.runtime.interpreter import InterpretedFunction

from nodice.gate.branches import BranchWatch, confirmable
from nodice.gate.pipeline import check
from nodice.gate.static import run_static
from nodice.references import reference_task_name
from nodice.tasks import get_task
from tests.conftest import run_cli

# A KernelBench-style problem: divide by a constant, then LeakyReLU.
PROBLEM = """
import torch
from torch import nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, divisor):
        super().__init__()
        self.divisor = divisor

    def forward(self, x):
        return F.leaky_relu(x / self.divisor, negative_slope=0.01)


batch_size = 8
features = 96
divisor = {divisor}


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [divisor]
"""

# Large batches multiply by the reciprocal, small ones divide: a flag and a scalar, both chosen.
CANDIDATE = """
import torch
from torch import nn
import triton
import triton.language as tl


@triton.jit
def _scale_leaky(x_ptr, y_ptr, n, s, USE_MUL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    if USE_MUL:
        v = v * s
    else:
        v = v / s
    tl.store(y_ptr + offs, tl.where(v >= 0, v, v * 0.01), mask=m)


class ModelNew(nn.Module):
    def __init__(self, divisor):
        super().__init__()
        self.divisor = divisor

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        use_mul = x.shape[0] >= {threshold}
        s = (1.0 / self.divisor) if use_mul else float(self.divisor)
        _scale_leaky[(triton.cdiv(n, 1024),)](x, out, n, s, USE_MUL=use_mul, BLOCK=1024)
        return out
"""


def _pair(tmp_path: Path, divisor: float, threshold: int = 4, candidate: str = CANDIDATE) -> tuple[Path, str]:
    ref = tmp_path / "problem.py"
    ref.write_text(PROBLEM.format(divisor=divisor))
    cand = tmp_path / "cand.py"
    cand.write_text(candidate.replace("{threshold}", str(threshold)))
    return cand, reference_task_name(ref)


def _static(cand: Path, task: str) -> list:
    violations, _ = run_static(cand, get_task(task), entry="ModelNew")
    return violations


def test_a_chosen_flag_and_scalar_are_settings_the_dynamic_stage_can_settle(
    tmp_path: Path,
) -> None:
    cand, task = _pair(tmp_path, 2.0)
    violations = _static(cand, task)
    assert sorted(f.protected for f in violations) == ["USE_MUL", "s"]
    for f in violations:
        assert f.rule == "elementwise_value_from_batch" and f.severity == "violation"
        assert f.branch is not None and f.branch["kind"] == "launch"
        assert f.branch["function"] == "_scale_leaky" and f.branch["param"] == f.protected
        assert confirmable(f)
    # Static analysis alone still rejects: it cannot know whether the two settings agree.
    r = check(cand, task, device="cpu", entry="ModelNew", seed=1, correctness=False, dynamic=False)
    assert r.verdict == "bi_violation" and "elementwise_value_from_batch" in {f.rule for f in r.findings}


def test_settings_that_round_alike_are_cleared_by_the_full_gate(tmp_path: Path) -> None:
    # x * 0.5 and x / 2 are the same number for every float: the settings agree bit for bit.
    cand, task = _pair(tmp_path, 2.0)
    r = check(cand, task, device="cpu", entry="ModelNew", seed=1)
    assert r.verdict == "pass", r.reason
    assert r.stage("static").verdict == "unresolved"  # type: ignore[union-attr]
    assert r.stage("branches").verdict == "pass"  # type: ignore[union-attr]
    launched = [f for f in r.findings if f.rule == "elementwise_value_from_batch"]
    assert len(launched) == 2 and {f.severity for f in launched} == {"cleared"}
    assert sum("ran with two settings of" in n for n in r.notes) == 2


def test_settings_that_round_differently_are_a_dynamic_mismatch(tmp_path: Path) -> None:
    # x * (1/3) and x / 3 differ in the last bit for many x: the negative control.
    cand, task = _pair(tmp_path, 3.0)
    r = check(cand, task, device="cpu", entry="ModelNew", seed=1)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.reason.startswith("dynamic:")
    assert {f.severity for f in r.findings if f.rule == "elementwise_value_from_batch"} == {"violation"}


def test_one_setting_only_keeps_the_finding(tmp_path: Path) -> None:
    # The multiply only runs from a batch no validation reaches: nothing shows the settings agree.
    cand, _ = _pair(tmp_path, 2.0, threshold=1_000_000)
    ref = str(tmp_path / "problem.py")
    proc = run_cli("check", str(cand), "--reference", ref, "--device", "cpu", "--seed", "1", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "bi_violation"
    assert "launched _scale_leaky with one setting of" in out["reason"]
    assert out["stages"]["branches"]["verdict"] == "reject"


@pytest.mark.parametrize(
    ("chosen", "why"),
    [
        # A number computed from the batch: the sample's values depend on it by arithmetic.
        ("s = 1.0 / (self.divisor * x.shape[0]) * x.shape[0]", "computed"),
        # The same flag, but the kernel folds the elements into a sum: the order is the question.
        ("s = 0.5", "reduced"),
    ],
)
def test_values_computed_from_the_batch_or_reduced_stay_static_violations(
    tmp_path: Path, chosen: str, why: str
) -> None:
    source = CANDIDATE.replace(
        "        s = (1.0 / self.divisor) if use_mul else float(self.divisor)\n", f"        {chosen}\n"
    )
    if why == "reduced":
        source = source.replace(
            "    tl.store(y_ptr + offs, tl.where(v >= 0, v, v * 0.01), mask=m)",
            "    tl.store(y_ptr + offs, tl.where(v >= 0, v, v * 0.01) + tl.sum(v, axis=0), mask=m)",
        )
    cand, task = _pair(tmp_path, 2.0, candidate=source)
    violations = _static(cand, task)
    rules = {f.protected: f.rule for f in violations}
    if why == "computed":
        # The flag stays a setting; the computed scalar does not.
        assert rules == {"USE_MUL": "elementwise_value_from_batch", "s": "batch_value_in_kernel_output"}
    else:
        assert rules.get("USE_MUL") == "batch_value_in_kernel_output"
    assert not all(confirmable(f) for f in violations)


def test_the_launch_watch_records_the_settings_a_kernel_is_launched_with(tmp_path: Path) -> None:
    cand, task = _pair(tmp_path, 2.0)
    violations = _static(cand, task)
    watch = BranchWatch(violations, cand)
    spec = importlib.util.spec_from_file_location("cand_settings", cand)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew(2.0)
    run = watch.wrap(model)
    run(torch.randn(2, 8))
    assert {w.branch["param"]: w.seen for w in watch.watches} == {"USE_MUL": {"first"}, "s": {"first"}}
    run(torch.randn(3, 8))  # the same settings again
    assert not any(w.covered() for w in watch.watches)
    run(torch.randn(4, 8))
    assert all(w.covered() for w in watch.watches)
    settings = {w.branch["param"]: sorted(v for _, v in w.settings) for w in watch.watches}
    assert settings == {"USE_MUL": ["False", "True"], "s": ["0.5", "2.0"]}
    # The hook is gone after each call: Triton's launch is its own again.
    assert InterpretedFunction.run.__qualname__ == "InterpretedFunction.run"
