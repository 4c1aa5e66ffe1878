"""The bundled MoE kernel (nodice/kernels/moe.py) on CPU, under Triton's interpreter: it passes the
whole gate, and its tiles change no arithmetic (its output is the seed's, bit for bit)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from nodice.gate.pipeline import check
from nodice.gate.runtime import prepare
from nodice.tasks import get_task
from tests.conftest import ROOT

CPU = torch.device("cpu")
BUNDLED = ROOT / "nodice" / "kernels" / "moe.py"
SEED = ROOT / "nodice" / "examples" / "moe" / "seed.py"


def _load(path: Path) -> ModuleType:
    prepare(CPU)  # the interpreter, with the gate's deterministic tl.dot
    spec = importlib.util.spec_from_file_location(f"moe_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_bundled_kernel_passes_the_gate_on_cpu() -> None:
    r = check(BUNDLED, "moe", device="cpu", seed=0)
    assert r.verdict == "pass", r.reason


def test_its_pins_depend_on_no_batch_dimension() -> None:
    mod = _load(BUNDLED)
    assert not hasattr(mod, "_block_m") and (mod.BLOCK_M, mod.BLOCK_N) == (64, 128)


@pytest.mark.parametrize("tokens", [1, 5, 40])
def test_its_output_is_the_seeds_bit_for_bit(tokens: int) -> None:
    task = get_task("moe")
    gen = torch.Generator().manual_seed(tokens)
    problem = task.problem(gen, CPU, torch.float32)
    args = task.compose(problem, [task.sample(problem, gen) for _ in range(tokens)], gen)
    bundled, seed = _load(BUNDLED).kernel(*args), _load(SEED).kernel(*args)
    assert bundled.shape == seed.shape and bundled.dtype == seed.dtype
    assert torch.equal(bundled.view(torch.int32), seed.view(torch.int32))


@pytest.mark.parametrize(
    ("tokens", "experts", "top_k", "block_m"),
    [(1, 8, 2, 64), (5, 128, 8, 64), (300, 8, 2, 64), (77, 60, 4, 16), (1000, 128, 8, 64)],
)
def test_its_one_kernel_grouping_is_the_seeds_torch_grouping(
    tokens: int, experts: int, top_k: int, block_m: int
) -> None:
    # Several placing programs, several counting steps (1000·8 pairs), experts that are not a power
    # of two, and experts that get no rows: the same layout as the seed's argsort/bincount grouping.
    gen = torch.Generator().manual_seed(tokens + experts)
    ids = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)]).to(torch.int32)
    got = _load(BUNDLED).group_by_expert(ids, experts, block_m)
    want = _load(SEED).group_by_expert(ids.long(), experts, block_m)
    for name, g, w in zip(("row_pair", "tile_expert", "pair_row"), got, want, strict=True):
        assert torch.equal(g.long(), w.long()), name


@pytest.mark.parametrize("descriptors", [False, True])
def test_the_wide_table_changes_no_arithmetic(monkeypatch: pytest.MonkeyPatch, descriptors: bool) -> None:
    # The CPU problem's experts are narrow: lower the table's bounds so that it is chosen, with the
    # row copy, the grouped program order and (as a pin) the descriptor loads.
    mod = _load(BUNDLED)
    monkeypatch.setattr(mod, "WIDE_MIN_INTER", 1)
    monkeypatch.setattr(mod, "WIDE_MAX_EXPERTS", 10**6)
    monkeypatch.setattr(mod, "WIDE_DESCRIPTORS", descriptors)
    task = get_task("moe")
    gen = torch.Generator().manual_seed(7)
    problem = task.problem(gen, CPU, torch.float32)
    args = task.compose(problem, [task.sample(problem, gen) for _ in range(40)], gen)
    _x, _logits, w_gate_up, w_down, top_k = args
    assert mod.is_wide(w_gate_up.shape[0], top_k, w_gate_up.shape[2], w_down.shape[2])
    wide, seed = mod.kernel(*args), _load(SEED).kernel(*args)
    assert torch.equal(wide.view(torch.int32), seed.view(torch.int32))
