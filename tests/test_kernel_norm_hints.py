"""The bundled norms' cache-hint pin (``STREAMING_HINTS``, shipped off) on CPU, under Triton's
interpreter: the hinted kernels compile and give the unhinted kernels' bits (hints move data in the
caches only), and the gate passes both."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from nodice.gate.pipeline import check
from tests.conftest import ROOT, load_kernel

CPU = torch.device("cpu")
KERNELS = {task: ROOT / "nodice" / "kernels" / f"{task}.py" for task in ("rmsnorm", "add_rmsnorm")}


def _load(task: str, hints: int) -> ModuleType:
    mod = load_kernel(KERNELS[task], f"{task}_hints_{hints}")
    mod.STREAMING_HINTS = hints
    return mod


@pytest.mark.parametrize("task", sorted(KERNELS))
@pytest.mark.parametrize(("rows", "hidden"), [(1, 64), (7, 300), (33, 1024)])
def test_hints_change_no_bit(task: str, rows: int, hidden: int) -> None:
    assert KERNELS[task].read_text().count("\nSTREAMING_HINTS = 0\n") == 1  # shipped off
    gen = torch.Generator().manual_seed(rows * hidden)
    x = torch.randn((rows, hidden), generator=gen)
    w = torch.randn((hidden,), generator=gen)
    args: tuple = (
        (x, w, 1e-6) if task == "rmsnorm" else (x, torch.randn((rows, hidden), generator=gen), w, 1e-6)
    )
    plain, hinted = _load(task, 0).kernel(*args), _load(task, 1).kernel(*args)
    outs = (plain, hinted) if task == "rmsnorm" else (plain[0], hinted[0])
    assert torch.equal(outs[0].view(torch.int32), outs[1].view(torch.int32))
    if task == "add_rmsnorm":
        assert torch.equal(plain[1].view(torch.int32), hinted[1].view(torch.int32))


@pytest.mark.parametrize("task", sorted(KERNELS))
def test_the_gate_passes_the_hinted_kernel(task: str, tmp_path: Path) -> None:
    hinted = tmp_path / f"{task}.py"
    hinted.write_text(KERNELS[task].read_text().replace("\nSTREAMING_HINTS = 0\n", "\nSTREAMING_HINTS = 1\n"))
    r = check(hinted, task, device="cpu", seed=0)
    assert r.verdict == "pass", r.reason
