"""Batch sizes a candidate compares its batch against become dynamic contexts (``gate.thresholds``).

A switch at ``x.shape[0] >= 32`` on a problem whose samples are too large for the usual 64-row
context shows only in a batch of 32 or more: the literal in the comparison gives the dynamic stage
batches of 31, 32 and 33, where the switch is compared bit for bit like any other choice."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.pipeline import check
from nodice.gate.thresholds import Thresholds, scan, straddling
from nodice.references import reference_task_name

# 393,216 fp32 per sample (1.5 MB): the usual CPU contexts stop at 17 rows, the threshold ones
# may reach 4 x 64 MB.
PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, -1.0, 1.0)


batch_size = 4
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
"""

SWITCH = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.shape[0] >= 32:
            return {large}
        return torch.clamp(x, -1.0, 1.0)
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("if x.shape[0] >= 32: pass", [32]),
        ("b = x.size(0)\nif b > 2 ** 6: pass", [64]),
        ("n, d = x.shape\nrows = n\nif 17 <= rows: pass", [17]),
        ("if len(x) < 8 or x.size()[0] == 1 << 10: pass", [8, 1024]),
        ("if x.shape[1] >= 4096 or flag == 3: pass", []),  # not a batch count
        ("if x.shape[0] > 1: pass", []),  # 1 is no batch size worth a context
    ],
)
def test_the_literals_compared_with_a_batch_count_are_found(
    tmp_path: Path, source: str, expected: list[int]
) -> None:
    assert scan(_write(tmp_path, "c.py", source)).batch == expected


def test_sizes_straddle_each_threshold_and_unparsable_code_gives_none(tmp_path: Path) -> None:
    assert straddling([2, 32]) == [2, 3, 31, 32, 33]
    assert scan(_write(tmp_path, "bad.py", "def (:")).batch == []


def test_a_precision_switch_above_the_usual_contexts_is_caught_and_an_exact_one_passes(
    tmp_path: Path,
) -> None:
    task = reference_task_name(_write(tmp_path, "ref.py", PROBLEM))
    bf16 = SWITCH.format(large="torch.clamp(x.to(torch.bfloat16), -1.0, 1.0).float()")
    r = check(_write(tmp_path, "bf16.py", bf16), task, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "bi_violation" and r.mismatch is not None, r.reason
    assert r.mismatch.context["batch_size"] in (32, 33) and "threshold" in r.mismatch.context["name"]
    # Negative control: the same switch to an exact path (a copy, then the same clamp) passes, and
    # its dynamic stage ran the threshold contexts (3 sizes x 2 positions more).
    exact = SWITCH.format(large="torch.clamp(x.clone(), -1.0, 1.0)")
    r = check(_write(tmp_path, "exact.py", exact), task, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "pass", r.reason
    plain = check(
        _write(tmp_path, "plain.py", SWITCH.replace("x.shape[0] >= 32", "False").format(large="x")),
        task,
        device="cpu",
        entry="ModelNew",
        seed=0,
    )
    dyn = {s.name: s for s in r.stages}["dynamic"]
    assert dyn.stats["contexts"] >= {s.name: s for s in plain.stages}["dynamic"].stats["contexts"] + 6


@pytest.mark.parametrize(
    ("source", "batch", "elements"),
    [
        ("if x.numel() >= 1 << 22: pass", [], [1 << 22]),
        ("n = x.nelement()\ntotal = n\nif total > 1_000_000: pass", [], [1_000_000]),
        ("if torch.numel(x) < 4096: pass", [], [4096]),
        ("BIG = 48\nif x.size(0) >= BIG: pass", [48], []),
        ("BIG = 48\nBIG = 64\nif x.size(0) >= BIG: pass", [], []),  # rebound: not a constant
        ("if x.numel() >= 1: pass", [], []),
    ],
)
def test_element_counts_and_module_constants_are_thresholds_too(
    tmp_path: Path, source: str, batch: list[int], elements: list[int]
) -> None:
    found = scan(_write(tmp_path, "c.py", source))
    assert (found.batch, found.elements) == (batch, elements)


def test_an_element_threshold_becomes_the_batch_that_reaches_it() -> None:
    # 4,194,304 elements of 393,216 a sample: 10.7 samples, so the switch happens from 11 on.
    assert Thresholds([32], [1 << 22]).batch_sizes([393216]) == [11, 32]
    assert Thresholds([], [1 << 22]).batch_sizes([]) == []  # a task with no per-sample count
    assert Thresholds([], [100]).batch_sizes([1000]) == []  # reached by one sample: no batch size


def test_a_precision_switch_on_the_element_count_is_caught_where_it_happens(tmp_path: Path) -> None:
    task = reference_task_name(_write(tmp_path, "ref.py", PROBLEM))
    numel = SWITCH.replace("x.shape[0] >= 32", "x.numel() > 12_000_000")  # from 31 samples on
    bf16 = numel.format(large="torch.clamp(x.to(torch.bfloat16), -1.0, 1.0).float()")
    r = check(_write(tmp_path, "bf16.py", bf16), task, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "bi_violation" and r.mismatch is not None, r.reason
    assert r.mismatch.context["batch_size"] in (31, 32) and "threshold" in r.mismatch.context["name"]
    exact = numel.format(large="torch.clamp(x.clone(), -1.0, 1.0)")
    r = check(_write(tmp_path, "exact.py", exact), task, device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "pass", r.reason
