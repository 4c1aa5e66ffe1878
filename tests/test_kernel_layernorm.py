"""The bundled LayerNorm kernel (``nodice/kernels/layernorm.py``) on CPU, under Triton's interpreter:
it is the task's bundled kernel and passes the whole gate, as shipped (one padded tile per row) and
with the row cut into power-of-two parts (the ``MAX_PARTS`` order knob); the parts come from the
hidden size alone and cover the row; a row's bits do not change with the batch; rows wider than
``MAX_ROW`` take the looped passes."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from nodice.gate.pipeline import check
from nodice.kernels import bundled_kernel
from tests.conftest import ROOT, load_kernel

KERNEL = ROOT / "nodice" / "kernels" / "layernorm.py"


def _load(name: str, **pins: int) -> ModuleType:
    mod = load_kernel(KERNEL, f"layernorm_{name}")
    for key, value in pins.items():
        setattr(mod, key, value)
    return mod


def _inputs(rows: int, hidden: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((rows, hidden), generator=gen) * 1.5 + 0.25
    w = torch.randn((hidden,), generator=gen) * 0.1 + 1.0
    b = torch.randn((hidden,), generator=gen) * 0.1
    return x, w, b


def test_it_is_the_tasks_bundled_kernel() -> None:
    assert bundled_kernel("layernorm") == KERNEL


@pytest.mark.parametrize("max_parts", [1, 2, 3])
def test_the_parts_cover_the_row_and_follow_the_hidden_size(max_parts: int) -> None:
    mod = _load(f"parts_{max_parts}", MAX_PARTS=max_parts)
    for hidden in (1, 17, 128, 129, 2560, 4544, 6144, 14336, 16384):
        parts = mod._parts(hidden)
        present = [p for p in parts if p]
        assert all(p & (p - 1) == 0 for p in present)  # powers of two, for tl.arange
        assert len(present) <= max_parts and parts[: len(present)] == tuple(present)
        assert sum(present) >= hidden
        # No part is wholly padding: the last one starts inside the row.
        assert sum(present[:-1]) < hidden
    if max_parts == 3:
        assert mod._parts(4544) == (4096, 512, 0) and mod._parts(14336) == (8192, 4096, 2048)
    if max_parts == 1:
        assert mod._parts(4544) == (8192, 0, 0)


@pytest.mark.parametrize("max_parts", [1, 3])
@pytest.mark.parametrize("hidden", [40, 300, 1000, 4544])
def test_rows_are_layer_norm_and_keep_their_bits_in_any_batch(max_parts: int, hidden: int) -> None:
    mod = _load(f"rows_{max_parts}", MAX_PARTS=max_parts, PART_GRAIN=64)
    x, w, b = _inputs(37, hidden, hidden)
    y = mod.kernel(x, w, b, 1e-5)
    ref = F.layer_norm(x.double(), (hidden,), w.double(), b.double(), 1e-5)
    # The worst-case fp32 error of a sum of `hidden` terms is hidden * 2^-24 relative to the sum of
    # their magnitudes: |x - mean| stays below 16 here and rstd * weight below 2.
    assert (y.double() - ref).abs().max().item() < hidden * 2.0**-24 * 16 * 2
    for rows in (1, 2, 5, 36):
        alone = mod.kernel(x[:rows].clone(), w, b, 1e-5)
        assert torch.equal(alone.view(torch.int32), y[:rows].view(torch.int32))


def test_rows_wider_than_the_tile_take_the_looped_passes() -> None:
    mod = _load("wide", MAX_ROW=1024)
    x, w, b = _inputs(3, 1500, 0)
    y = mod.kernel(x, w, b, 1e-5)
    ref = F.layer_norm(x.double(), (1500,), w.double(), b.double(), 1e-5)
    assert (y.double() - ref).abs().max().item() < 1500 * 2.0**-24 * 16 * 2
    assert torch.equal(mod.kernel(x[:1].clone(), w, b, 1e-5), y[:1])


@pytest.mark.parametrize("max_parts", [1, 3])
def test_the_gate_passes_it(max_parts: int, tmp_path: Path) -> None:
    source = KERNEL.read_text()
    assert source.count("\nMAX_PARTS = 1\n") == 1  # shipped: one padded tile
    candidate = tmp_path / "layernorm.py"
    candidate.write_text(source.replace("\nMAX_PARTS = 1\n", f"\nMAX_PARTS = {max_parts}\n"))
    r = check(candidate, "layernorm", device="cpu", seed=0)
    assert r.verdict == "pass", r.reason
