"""The bundled attention decode kernel (nodice/kernels/attention_decode.py: one launch, the last
split of each (request, kv head) to arrive folds the partials) under Triton's interpreter, in fp32:
it matches the task's reference with one split, several short splits and the long split; a request
alone is bit for bit the same request anywhere in a batch and wherever its pages sit; its arrival
counters are back at zero after every call; FOLD_HEADS changes no bit; and with the long rule off
and the same pins its output is the two-launch kernel's (split kernel, then a combine) bit for bit."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from nodice.tasks import get_task
from nodice.tasks.base import Problem, Sample
from tests.conftest import ROOT, load_kernel

CPU = torch.device("cpu")
FUSED = ROOT / "nodice" / "kernels" / "attention_decode.py"
TWO_LAUNCH = ROOT / "lab" / "candidates" / "attention_decode_two_launch.py"
TASK = get_task("attention_decode")
HEAD_DIM = 32
PAGE = 8
# One split, one split exactly full, two short splits, LONG_FROM_TOKENS_SMALL and one past it
# (short splits, then long ones), and long requests of several splits.
LENGTHS = (1, 7, 16, 17, 40, 41, 100, 200)
# The requests moved around batches: one split, two short splits, the last length of the short
# rule, the first of the long one, and many long splits. Batchmates of 1 to 100 tokens.
MOVED = [("gqa", n) for n in (1, 17, 40, 41, 200)] + [("mha", n) for n in (1, 41, 200)]
MATES = (1, 100)


def _load(path: Path, name: str) -> ModuleType:
    return load_kernel(path, name)


@pytest.fixture
def fused() -> ModuleType:
    """A fresh instance per test: a test's pins stay in its own module."""
    return _load(FUSED, "attention_decode_fused")


@pytest.fixture
def two_launch() -> ModuleType:
    return _load(TWO_LAUNCH, "attention_decode_two_launch")


def _problem(layout: str, gen: torch.Generator) -> Problem:
    return TASK.problem(gen, CPU, torch.float32, layout=layout, head_dim=HEAD_DIM, page=PAGE)


def _request(problem: Problem, gen: torch.Generator, length: int) -> Sample:
    return TASK.sample(problem, gen, mate_len=(length, length))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def _n_splits(mod: ModuleType, length: int) -> tuple[int, bool]:
    """(splits, long rule on) of a request under the small-head-dim pins, as the kernel chooses them."""
    split = mod.SPLIT_TOKENS_SMALL
    long_split = max(mod.LONG_SPLIT_TOKENS_SMALL, split)
    is_long = long_split > split and length > mod.LONG_FROM_TOKENS_SMALL
    size = long_split if is_long else split
    return -(-length // size), is_long


def test_the_lengths_cover_every_split_rule(fused: ModuleType) -> None:
    splits = [_n_splits(fused, n) for n in LENGTHS]
    assert any(n == 1 for n, _ in splits)
    assert any(n > 1 and not is_long for n, is_long in splits)
    assert any(n > 1 and is_long for n, is_long in splits)
    assert {fused.LONG_FROM_TOKENS_SMALL, fused.LONG_FROM_TOKENS_SMALL + 1} <= set(LENGTHS)
    assert HEAD_DIM < 128  # the small pins apply


@pytest.mark.parametrize("split_tile", [None, 2], ids=["pinned_tile", "tile2"])
@pytest.mark.parametrize("layout", ["gqa", "mha", "mqa"])
def test_it_matches_the_reference(fused: ModuleType, layout: str, split_tile: int | None) -> None:
    # Tile 2: the longest requests' folds take several tiles, the last one partly masked.
    if split_tile is not None:
        fused.SPLIT_TILE = split_tile
    gen = torch.Generator().manual_seed(11)
    problem = _problem(layout, gen)
    args = TASK.compose(problem, [_request(problem, gen, n) for n in LENGTHS], gen)
    out = fused.kernel(*args)
    assert out.shape == args[0].shape and out.dtype == torch.float32
    tol = TASK.tolerance(torch.float32)
    torch.testing.assert_close(out, TASK.reference(*args), atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize(("layout", "length"), MOVED)
def test_a_request_alone_is_the_same_request_in_any_batch(
    fused: ModuleType, layout: str, length: int
) -> None:
    gen = torch.Generator().manual_seed(100 + length)
    problem = _problem(layout, gen)
    target = _request(problem, gen, length)
    n_pages = -(-length // PAGE)
    placements = set()

    def run(batch: list[Sample], slot: int) -> torch.Tensor:
        args = TASK.compose(problem, batch, gen)
        assert int(args[4][slot]) == length
        placements.add(tuple(args[3][slot, :n_pages].tolist()))
        return fused.kernel(*args)[slot]

    alone = run([target], 0)
    # Alone again, its pages elsewhere in a differently sized pool.
    assert torch.equal(_bits(run([target], 0)), _bits(alone))
    for size in (2, 3, 9):
        for slot in sorted({0, size // 2, size - 1}):
            mates = TASK.samples(problem, gen, size - 1, mate_len=MATES)
            got = run([*mates[:slot], target, *mates[slot:]], slot)
            assert torch.equal(_bits(got), _bits(alone)), f"batch {size}, slot {slot}"
    assert len(placements) > 1, "the request's pages never moved"


def test_the_counters_are_back_at_zero_after_a_call(fused: ModuleType) -> None:
    gen = torch.Generator().manual_seed(5)
    problem = _problem("gqa", gen)
    args = TASK.compose(problem, [_request(problem, gen, n) for n in LENGTHS], gen)
    fused.CACHE_COUNTERS = False
    fresh = fused.kernel(*args)
    assert not fused._COUNTERS  # a zeroed buffer for that call alone, none kept
    fused.CACHE_COUNTERS = True
    first = fused.kernel(*args)
    counters = fused._COUNTERS[CPU]
    assert counters.dtype == torch.int32 and counters.numel() >= len(LENGTHS) * problem.dims["Hkv"]
    assert not counters.any()
    # The next call finds them at zero and folds as the first did, which folded as a fresh buffer does.
    second = fused.kernel(*args)
    assert fused._COUNTERS[CPU] is counters and not counters.any()
    assert torch.equal(_bits(first), _bits(fresh))
    assert torch.equal(_bits(second), _bits(first))


def test_the_counter_buffer_grows_zeroed(fused: ModuleType) -> None:
    small = fused._counters(CPU, 8)
    assert small.numel() >= 8 and not small.any()
    big = fused._counters(CPU, small.numel() + 1)
    assert big.numel() > small.numel() and not big.any()
    assert fused._counters(CPU, 8) is big


@pytest.mark.parametrize("pins", ["two_launch", "small"])
@pytest.mark.parametrize("layout", ["gqa", "mha", "mqa"])
def test_without_the_long_rule_it_is_the_two_launch_kernel(
    fused: ModuleType, two_launch: ModuleType, layout: str, pins: str
) -> None:
    # "two_launch": the two-launch kernel's own pins. "small": both with short splits and a narrow
    # fold tile, so that folds of many splits take several tiles.
    if pins == "small":
        two_launch.SPLIT_TOKENS_SMALL, two_launch.BLOCK_N_SMALL, two_launch.SPLIT_TILE = 16, 16, 4
    fused.LONG_SPLIT_TOKENS_SMALL = 0
    fused.SPLIT_TOKENS_SMALL = two_launch.SPLIT_TOKENS_SMALL
    fused.BLOCK_N_SMALL = two_launch.BLOCK_N_SMALL
    fused.SPLIT_TILE = two_launch.SPLIT_TILE
    assert any(_n_splits(fused, n)[0] > 1 for n in LENGTHS)  # some requests are folded
    gen = torch.Generator().manual_seed(21)
    problem = _problem(layout, gen)
    args = TASK.compose(problem, [_request(problem, gen, n) for n in LENGTHS], gen)
    got, want = fused.kernel(*args), two_launch.kernel(*args)
    assert torch.equal(_bits(got), _bits(want))


@pytest.mark.parametrize(
    ("layout", "split_tile"), [("gqa", None), ("mqa", None), ("mqa", 4)], ids=["gqa", "mqa", "mqa-tile4"]
)
def test_fold_heads_changes_no_bit(layout: str, split_tile: int | None) -> None:
    # gqa: a group of 2 (FOLD_HEADS 4 folds 2); mqa: a group of 4, folded in 4, 2 or 1 passes.
    gen = torch.Generator().manual_seed(31)
    problem = _problem(layout, gen)
    args = TASK.compose(problem, [_request(problem, gen, n) for n in LENGTHS], gen)
    outs = []
    for fold_heads in (1, 2, 4):
        mod = _load(FUSED, f"attention_decode_fold{fold_heads}")
        mod.FOLD_HEADS = fold_heads
        if split_tile is not None:
            mod.SPLIT_TILE = split_tile
        outs.append(_bits(mod.kernel(*args)))
    assert all(torch.equal(o, outs[0]) for o in outs[1:])
