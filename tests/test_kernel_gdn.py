"""The bundled gdn kernel (nodice/kernels/gdn.py) under Triton's interpreter: the chunked form against the
gdn task's reference across chunk boundaries, and one sequence alone vs inside a batch (CPU)."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import pytest
import torch

from nodice.gate.runtime import prepare
from nodice.tasks import get_task
from nodice.tasks.base import Sample
from tests.conftest import ROOT

CPU = torch.device("cpu")
CANDIDATE = ROOT / "nodice" / "kernels" / "gdn.py"


@pytest.fixture(scope="module")
def candidate() -> ModuleType:
    prepare(CPU)  # the interpreter, with the gate's deterministic tl.dot
    spec = importlib.util.spec_from_file_location("gdn_chunked", CANDIDATE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _samples(length: int, count: int, seed: int) -> tuple[Any, list[Sample], torch.Generator]:
    task = get_task("gdn")
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, T=length)
    return problem, [task.sample(problem, gen) for _ in range(count)], gen


# (chunk, compact block of the inverse, length): one partial chunk, exact multiples, and several
# chunks with a partial last one.
@pytest.mark.parametrize(
    ("chunk", "sub", "length"), [(64, 16, 20), (16, 16, 32), (16, 16, 37), (32, 16, 70), (64, 32, 70)]
)
def test_matches_the_reference_across_chunks(
    candidate: ModuleType, monkeypatch: pytest.MonkeyPatch, chunk: int, sub: int, length: int
) -> None:
    monkeypatch.setattr(candidate, "CHUNK", chunk)
    monkeypatch.setattr(candidate, "INVERSE_SUB", sub)
    task = get_task("gdn")
    problem, samples, gen = _samples(length, 2, seed=chunk + length)
    args = task.compose(problem, samples, gen)
    out, ref = candidate.kernel(*args), task.reference(*args)
    tol = task.tolerance(torch.float32)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert torch.allclose(out, ref, atol=tol.atol, rtol=tol.rtol), (out - ref).abs().max()


def test_a_sequence_alone_equals_itself_in_a_batch(
    candidate: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 16-token chunks so that the state crosses two chunk boundaries of a 37-token sequence.
    monkeypatch.setattr(candidate, "CHUNK", 16)
    task = get_task("gdn")
    problem, samples, gen = _samples(37, 4, seed=7)
    target = samples[0]
    alone = candidate.kernel(*task.compose(problem, [target], gen))[0]
    for slot in (0, 1, 3):
        mates = samples[1:]
        batch = [*mates[:slot], target, *mates[slot:]]
        inside = candidate.kernel(*task.compose(problem, batch, gen))[slot]
        assert torch.equal(alone.view(torch.int32), inside.view(torch.int32)), f"slot {slot}"
