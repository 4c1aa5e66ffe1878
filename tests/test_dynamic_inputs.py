"""The dynamic stage's inputs are a function of the seed alone: pinned by a digest of every batch it builds.

The digests were recorded from the gate before its batches were built by indexing (one copy per
context) instead of stacking sample by sample: a change to how inputs are made must not change them.
They were re-recorded once, when only the first ``RERUN_ALONE`` tracked samples of a problem came to
run twice alone (277 calls a dtype before, 157 after); the new call sequence was checked to be the
old one with 120 of those repeated batch-1 calls left out, every other call's arguments the same.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest
import torch

from nodice.gate.dynamic import validate
from nodice.tasks import get_task

CPU = torch.device("cpu")

# task -> (kernel calls, sha256 of every call's arguments, in call order), seed 3, fp32 and fp16.
PINNED = {
    "rmsnorm": {
        "torch.float32": (157, "c7a0ebc1f044d621ddf0b5edd86d4290b962ea0471cd1d82b0374431fb1f142b"),
        "torch.float16": (157, "2ff9e67db1bc608cbc51f52caf68e539a5b0d65fc2c0995f2fc7b9f1e53afa4f"),
    },
    "add_rmsnorm": {
        "torch.float32": (157, "412e603b08b25eb05781f8b651f13527f5c5303faccea99dcdadc2a3d766b1b0"),
        "torch.float16": (157, "089b1e87217dd3b7f27d7a78ea402ac9fa05e3c4ed22932aeecc9d319a59c24b"),
    },
}


def _digest(args: tuple[Any, ...], h: Any) -> None:
    for a in args:
        if isinstance(a, torch.Tensor):
            h.update(f"{tuple(a.shape)}{a.dtype}{tuple(a.stride())}".encode())
            h.update(a.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(a).encode())


@pytest.mark.parametrize("name", sorted(PINNED))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_same_seed_builds_the_same_batches(name: str, dtype: torch.dtype) -> None:
    task = get_task(name)
    h = hashlib.sha256()
    calls = 0

    def kernel(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        _digest(args, h)
        return task.reference(*args)

    r = validate(task, kernel, Path(__file__), CPU, dtype, seed=3)
    assert r.mismatch is None
    assert (calls, h.hexdigest()) == PINNED[name][str(dtype)]


def _perturbed(task_name: str, batch: int, row: int, output: int) -> Any:
    """The reference, with one element of one row of one output a bit off in batches of ``batch``."""
    task = get_task(task_name)

    def kernel(*args: Any) -> Any:
        out = task.reference(*args)
        outs = out if isinstance(out, tuple) else (out,)
        if args[0].shape[0] == batch:
            outs[output].view(torch.int32)[row, 5] += 1
        return out

    return kernel


_UP_TO_8 = ["batch=1,rerun"] + [f"batch={b},{p}" for b in (2, 3) for p in ("first", "middle", "last")]
_UP_TO_8.append("batch=8,first")
_UP_TO_64 = [
    *_UP_TO_8,
    "batch=8,middle",
    "batch=8,last",
    "batch=17,first",
    "batch=17,middle",
    "batch=17,last",
]
# (task, batch, row, output) -> the report's fields, recorded before the change above. The call
# counts were updated when only the first RERUN_ALONE samples came to run twice alone (60 fewer
# calls a problem; one more where the differing witness is run alone again before the report).
REPORTS: dict[tuple[str, int, int, int], dict[str, Any]] = {
    ("rmsnorm", 17, -1, 0): {
        "context": {"name": "batch=17,first", "batch_size": 17, "position": 16},
        "sample": "witness 4",
        "output": "y",
        "index": [5],
        "expected": -0.3583527207374573,
        "got": -0.35835275053977966,
        "differing": 1,
        "total": 1024,
        "contexts": [*_UP_TO_8, "batch=8,middle", "batch=8,last", "batch=17,first"],
        "calls": 79,
    },
    ("rmsnorm", 64, 9, 0): {
        "context": {"name": "batch=64,first", "batch_size": 64, "position": 9},
        "sample": "witness 1",
        "output": "y",
        "index": [5],
        "expected": -1.2339082956314087,
        "got": -1.2339084148406982,
        "differing": 1,
        "total": 1024,
        "contexts": [*_UP_TO_64, "batch=64,first"],
        "calls": 81,
    },
    ("add_rmsnorm", 8, 4, 1): {
        "context": {"name": "batch=8,first", "batch_size": 8, "position": 4},
        "sample": "witness 6",
        "output": "residual_out",
        "index": [5],
        "expected": -1.063062071800232,
        "got": -1.0630621910095215,
        "differing": 1,
        "total": 1024,
        "contexts": _UP_TO_8,
        "calls": 76,
    },
    ("add_rmsnorm", 65, 32, 0): {
        "context": {"name": "H=64,batch=65,middle", "batch_size": 65, "position": 32, "variant": {"H": 64}},
        "sample": "target",
        "output": "y",
        "index": [5],
        "expected": 1.2681777477264404,
        "got": 1.26817786693573,
        "differing": 1,
        "total": 64,
        "contexts": _UP_TO_64
        + ["batch=64,first", "batch=64,middle", "batch=64,last", "batch=1,rerun"]
        + [f"H=64,batch={b},middle" for b in (3, 17, 33, 65)],
        "calls": 155,
    },
}


@pytest.mark.parametrize("case", sorted(REPORTS))
def test_the_same_seed_gives_the_same_report(case: tuple[str, int, int, int]) -> None:
    task_name = case[0]
    r = validate(get_task(task_name), _perturbed(*case), Path(__file__), CPU, torch.float32, seed=5)
    assert r.mismatch is not None
    got = {**dataclasses.asdict(r.mismatch), "contexts": r.contexts, "calls": r.kernel_calls}
    assert got == REPORTS[case]
