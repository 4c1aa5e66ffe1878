"""Choices made from the batch's values, reached with inputs off the task's distribution.

A fast path taken when no element of the batch is negative never sees its other side on
``torch.rand`` inputs, and one taken when every element is non-negative never sees its own side on
``randn`` inputs: the watched branch stays half-covered and static analysis has the last word. The
dynamic stage's value search (``gate.dynamic.VALUE_SEARCH``) puts a tracked sample from one regime
beside batchmates from the other, and compares its bits like any other context: an exact fast path
is cleared, one whose bits differ is caught dynamically.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from nodice.gate.dynamic import VALUE_SEARCH, Values
from nodice.gate.pipeline import check
from nodice.references import reference_task_name
from nodice.tasks.base import Sample

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.elu(x)


batch_size = 4
dim = 1024


def get_inputs():
    return [{draw}(batch_size, dim)]


def get_init_inputs():
    return []
"""

CANDIDATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if {condition}:
            return {fast}
        return F.elu(x)
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _judge(tmp_path: Path, draw: str, condition: str, fast: str) -> tuple[str, str, dict, dict]:
    task = reference_task_name(_write(tmp_path, f"ref_{draw.split('.')[-1]}.py", PROBLEM.format(draw=draw)))
    name = f"c{abs(hash((condition, fast))) % 10**8}.py"
    cand = _write(tmp_path, name, CANDIDATE.format(condition=condition, fast=fast))
    r = check(cand, task, device="cpu", entry="ModelNew", seed=0)
    stages = {s.name: s for s in r.stages}
    context = r.mismatch.context if r.mismatch is not None else {}
    return r.verdict, r.reason, stages["dynamic"].stats if "dynamic" in stages else {}, context


@pytest.mark.parametrize(
    ("draw", "condition"),
    [
        ("torch.rand", "bool((x >= 0).all())"),  # the other side needs a negative batchmate
        ("torch.randn", "bool((x >= 0).all())"),  # the taken side needs a non-negative batch
    ],
)
def test_an_exact_sign_fast_path_is_cleared_and_one_that_rounds_is_caught(
    tmp_path: Path, draw: str, condition: str
) -> None:
    verdict, reason, stats, _ = _judge(tmp_path, draw, condition, "x.clone()")
    assert verdict == "pass", reason
    assert stats["value_rounds"] >= 1
    # Negative control: the same fast path storing through fp16 changes a sample's bits when its
    # batchmates send the batch the other way.
    verdict, reason, _, context = _judge(tmp_path, draw, condition, "x.half().float()")
    assert verdict == "bi_violation", reason
    assert reason.startswith("dynamic:") and context.get("inputs") in {v.name for v in VALUE_SEARCH}
    assert f"({context['inputs']})" in reason


def test_a_precision_choice_on_the_batch_magnitude_is_reached_by_large_batchmates(tmp_path: Path) -> None:
    # fp16 while everything fits its range: the task's inputs always do.
    condition = "float(x.abs().max()) < 60000.0"
    verdict, reason, _, context = _judge(tmp_path, "torch.randn", condition, "F.elu(x.half()).float()")
    assert verdict == "bi_violation" and context["inputs"] == "batchmates scaled by 2^16", reason
    verdict, reason, _, _ = _judge(tmp_path, "torch.randn", condition, "F.elu(x.clone())")
    assert verdict == "pass", reason


def test_a_sparse_path_for_a_mostly_zero_batch_is_reached_by_zeroed_batchmates(tmp_path: Path) -> None:
    condition = "bool((x == 0).float().mean() > 0.5)"
    verdict, reason, _, _ = _judge(tmp_path, "torch.rand", condition, "F.relu(x)")  # ELU's bits on x >= 0
    assert verdict == "pass", reason
    verdict, reason, _, context = _judge(tmp_path, "torch.rand", condition, "F.relu(x).half().float()")
    assert verdict == "bi_violation" and context["inputs"] == "batchmates zeroed", reason


def test_a_side_no_map_reaches_stays_a_static_rejection(tmp_path: Path) -> None:
    # A path for batches holding a NaN: no sign or scale map of finite inputs makes one.
    verdict, reason, stats, _ = _judge(tmp_path, "torch.rand", "bool(torch.isnan(x).any())", "x.clone()")
    assert verdict == "bi_violation" and reason.startswith("static:") and "never ran" in reason, reason
    assert stats["value_rounds"] == len(VALUE_SEARCH)  # each map tried once, none went further


def test_a_kernel_that_refuses_the_mapped_inputs_leaves_the_map_unjudged(tmp_path: Path) -> None:
    # Negative values are refused outright: the rounds with negated batchmates crash, which is not
    # the candidate's error (the gate chose those inputs), and what the watch saw there is unsaid.
    task = reference_task_name(_write(tmp_path, "ref.py", PROBLEM.format(draw="torch.rand")))
    refuses = CANDIDATE.replace("return F.elu(x)", "raise ValueError('negative input')")
    cand = _write(tmp_path, "refuses.py", refuses.format(condition="bool((x >= 0).all())", fast="F.relu(x)"))
    r = check(cand, task, device="cpu", entry="ModelNew", seed=0)
    assert (
        r.verdict == "bi_violation"
        and r.reason.startswith("static:")
        and "never ran its other side" in r.reason
    )
    assert any(n.startswith("inputs with batchmates negated: not judged") for n in r.notes), r.notes


def test_a_map_touches_only_float_inputs() -> None:
    s = Sample({"x": torch.tensor([-1.0, 2.0]), "ids": torch.tensor([3, -4])}, {"len": 2})
    v = Values("m", torch.abs, torch.neg)
    tracked, mate = v.remap(s, mate=False), v.remap(s, mate=True)
    assert tracked.tensors["x"].tolist() == [1.0, 2.0] and mate.tensors["x"].tolist() == [1.0, -2.0]
    assert tracked.tensors["ids"].tolist() == [3, -4] == mate.tensors["ids"].tolist()
    assert tracked.meta == {"len": 2}
