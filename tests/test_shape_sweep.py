"""The problem-shape sweep of dynamic validation: products of the batch with another dimension cross
the usual thresholds between the contexts, and a heuristic keyed on such a product is caught."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks._attention import HOPPER_SM_COUNT, SWEEP_LAYOUTS, pick_layout
from nodice.tasks.base import BIContext

DEVICES = [torch.device("cpu"), torch.device("cuda")]


def _heads(task_name: str, ctx: BIContext, device: torch.device) -> int:
    """Query heads (attention, gdn) or elements per row (norms) of a context's problem."""
    variant = ctx.params.get("variant") or {}
    if task_name.startswith("attention"):
        name = variant.get("layout")
        return pick_layout(torch.Generator(), device, name).q_heads if name else 0
    if task_name in ("gdn", "kda"):
        return int(variant.get("Hh") or (2 if device.type == "cpu" else 32))
    return int(variant.get("H") or (1024 if device.type == "cpu" else 4096))


@pytest.mark.parametrize("device", DEVICES, ids=["cpu", "cuda"])
@pytest.mark.parametrize(
    "task_name", ["attention_prefill", "attention_decode", "attention_varlen", "gdn", "kda"]
)
def test_batch_times_heads_crosses_the_sm_count_from_a_single_head(
    task_name: str, device: torch.device
) -> None:
    task = get_task(task_name)
    products = sorted({c.batch_size * _heads(task_name, c, device) for c in task.contexts(device)})
    # From a handful of programs at the smallest context to past one wave of the H200.
    assert products[0] <= 4 and products[-1] > HOPPER_SM_COUNT
    for threshold in (8, 16, 32, 64, HOPPER_SM_COUNT):
        assert any(p < threshold for p in products) and any(p >= threshold for p in products), threshold
    # The sweep's problems use a single-head (or two-head) layout, never drawn for correctness.
    assert any(_heads(task_name, c, device) <= 2 for c in task.contexts(device))


@pytest.mark.parametrize("device", DEVICES, ids=["cpu", "cuda"])
@pytest.mark.parametrize("task_name", ["rmsnorm", "add_rmsnorm", "layernorm"])
def test_batch_elements_cross_powers_of_two_below_one_real_row(task_name: str, device: torch.device) -> None:
    task = get_task(task_name)
    elements = sorted({c.batch_size * _heads(task_name, c, device) for c in task.contexts(device)})
    row = 1024 if device.type == "cpu" else 4096
    for threshold in (256, 1024, row):
        assert any(e < threshold for e in elements) and any(e >= threshold for e in elements), threshold


def test_sweep_layouts_are_only_used_by_name() -> None:
    gen = torch.Generator().manual_seed(0)
    drawn = {pick_layout(gen, torch.device("cpu"), None).name for _ in range(64)}
    assert drawn.isdisjoint(SWEEP_LAYOUTS)
    assert pick_layout(gen, torch.device("cuda"), "h1").q_heads == 1
    with pytest.raises(ValueError, match="unknown head layout 'h3'"):
        pick_layout(gen, torch.device("cpu"), "h3")


# A prefill kernel that shortens its key tiles while the launch has few (sequence, head) pairs —
# the kind of occupancy heuristic that the real head layouts at batch 1 are already past.
FEW_PROGRAMS_TILE = """
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path({seed!r}).parent))
from seed import LOG2E, _flash_forward


def kernel(q, k, v, causal, sm_scale):
    batch, q_heads, seq_len, head_dim = q.shape
    o = torch.empty_like(q)
    block_n = 8 if batch * q_heads < 4 else 16
    grid = (triton.cdiv(seq_len, 32), batch * q_heads)
    _flash_forward[grid](q.contiguous(), k.contiguous(), v.contiguous(), o, sm_scale * LOG2E, seq_len,
                         q_heads, q_heads // k.shape[1], CAUSAL=bool(causal), HEAD_DIM=head_dim,
                         BLOCK_M=32, BLOCK_N=block_n)
    return o
"""


def test_a_tile_chosen_from_batch_times_heads_is_caught_dynamically(tmp_path: Path) -> None:
    import nodice

    seed = Path(nodice.__file__).parent / "examples" / "attention_prefill" / "seed.py"
    path = tmp_path / "few_programs_tile.py"
    path.write_text(textwrap.dedent(FEW_PROGRAMS_TILE.format(seed=str(seed))))
    r = check(path, "attention_prefill", device="cpu", static=False, correctness=False, seed=0)
    assert r.verdict == "bi_violation", r.reason
    # Only the one- and two-head problems of the sweep start below four programs.
    assert r.mismatch is not None and str(r.mismatch.context.get("name", "")).startswith(("h1", "h2"))
