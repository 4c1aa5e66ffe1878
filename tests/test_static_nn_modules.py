"""``torch.nn`` modules built in ``__init__`` and called in ``forward``, as KernelBench's ``ModelNew``
files keep them: followed as the functional call each one makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

LINEAR = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        {body}
"""


@pytest.mark.parametrize(
    "body",
    [
        "return self.fc(x) * 0.5",
        "return F.linear(x, self.fc.weight, self.fc.bias) * 0.5",
        "return x @ self.fc.weight.t() * 0.5",
    ],
)
def test_a_linear_module_on_the_batch_is_the_library_gemm_it_calls(tmp_path: Path, body: str) -> None:
    """``self.fc(x)`` runs cuBLAS with the batch as M, exactly as ``F.linear`` on the same weights:
    the same finding, with the module's line in the trace."""
    path = tmp_path / "cand.py"
    path.write_text(LINEAR.replace("{body}", body))
    violations, unresolved = run_static(path, get_task("rmsnorm"), entry="ModelNew")
    assert unresolved == []
    assert [f.rule for f in violations] == ["library_kernel_by_shape"]
    assert body.removeprefix("return ") in "\n".join(violations[0].path)


@pytest.mark.parametrize(
    "body",
    [
        # one sample's rows at a time: M is 1 whatever the batch
        "return torch.cat([self.fc(x[i : i + 1]) for i in range(x.shape[0])])",
        # the module holds the weights only; the product is a fixed-shape row-wise sum
        "return (x[:, None, :] * self.fc.weight[None]).sum(-1) + self.fc.bias",
    ],
)
def test_a_linear_module_off_the_batch_is_not_blamed(tmp_path: Path, body: str) -> None:
    path = tmp_path / "cand.py"
    path.write_text(LINEAR.replace("{body}", body))
    assert run_static(path, get_task("rmsnorm"), entry="ModelNew") == ([], [])


CONV = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.act = nn.Hardswish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        {body}
"""


def test_a_convolution_on_the_batch_is_left_to_dynamic_validation(tmp_path: Path) -> None:
    """cuDNN picks a convolution's algorithm from the input's shape, batch included, yet many keep a
    sample's bits whatever the batch: unresolved, never a static rejection."""
    path = tmp_path / "cand.py"
    path.write_text(CONV.replace("{body}", "return self.act(self.conv(x))"))
    violations, unresolved = run_static(path, get_task("rmsnorm"), entry="ModelNew")
    assert violations == []
    assert [f.rule for f in unresolved] == ["library_batched_kernel"]
    assert "conv2d runs a library convolution" in unresolved[0].message
    per_sample = "return torch.cat([self.act(self.conv(x[i : i + 1])) for i in range(x.shape[0])])"
    path.write_text(CONV.replace("{body}", per_sample))
    assert run_static(path, get_task("rmsnorm"), entry="ModelNew") == ([], [])


@pytest.mark.parametrize(("cast", "found"), [("h = h.half()", True), ("h = h * 1.0", False)])
def test_a_modules_output_keeps_the_batch_axis(tmp_path: Path, cast: str, found: bool) -> None:
    """An activation module's output is a sample's own data with the batch on its first axis, so a
    precision chosen from its size is found (it was an untracked value before); the same code that
    casts for no batch is the negative control."""
    body = f"h = self.act(x)\n        if h.shape[0] >= 32:\n            {cast}\n        return h.to(x.dtype)"
    path = tmp_path / "cand.py"
    path.write_text(CONV.replace("{body}", body))
    violations, unresolved = run_static(path, get_task("rmsnorm"), entry="ModelNew")
    assert unresolved == []
    assert [f.rule for f in violations] == (["batch_value_in_kernel_output"] if found else [])


SOFTMAX = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.soft = nn.Softmax(dim={dim})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {call}
"""


@pytest.mark.parametrize("call", ["self.soft(x)", "torch.softmax(x, dim={dim})", "x.log_softmax({dim})"])
@pytest.mark.parametrize(("dim", "found"), [("0", True), ("1", False), ("-1", False)])
def test_a_softmax_over_the_batch_axis_couples_the_samples(
    tmp_path: Path, call: str, dim: str, found: bool
) -> None:
    """Along the batch axis each sample's output is divided by a sum over its batchmates: a batch
    statistic, by module or function; along a sample's own axis it is per-sample data."""
    path = tmp_path / "cand.py"
    path.write_text(SOFTMAX.replace("{call}", call).replace("{dim}", dim))
    violations, unresolved = run_static(path, get_task("rmsnorm"), entry="ModelNew")
    assert unresolved == []
    assert [f.rule for f in violations] == (["batch_value_in_kernel_output"] if found else [])
    if found:
        assert "over the batch axis" in "\n".join(violations[0].path)
