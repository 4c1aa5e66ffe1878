"""Tiles of the batch padded to a fixed row count: ``x[s:s + C]`` zero-padded to C rows.

A GEMM called on every C-row tile of the batch sees one shape whatever the batch when the last,
short tile is padded: the library picks one kernel for every call, and a sample's row is reduced
the same way wherever the batch puts it. Unpadded, the last tile's row count is what is left of
the batch. The static stage follows the padding arithmetic (``gate.static.tiles``) and the full
gate judges both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

HEAD = """\
import torch
import torch.nn.functional as F

TILE = 16


def kernel(a, b):
    m, k = a.shape
    out = a.new_empty(m, b.shape[1])
    for s in range(0, m, TILE):
        t = a[s:s + TILE]
        n = t.shape[0]
"""
TAIL = "    return out\n"

PADDED = {
    "cat_under_if": """\
        if n < TILE:
            t = torch.cat([t, t.new_zeros(TILE - n, k)])
        out[s:s + n] = (t @ b)[:n]
""",
    "cat_always": """\
        t = torch.cat([t, torch.zeros(TILE - n, k, dtype=t.dtype)], dim=0)
        out[s:s + n] = torch.mm(t, b)[:n]
""",
    "pad_under_mirrored_test": """\
        if TILE != n:
            t = F.pad(t, (0, 0, 0, TILE - n))
        out[s:s + n] = torch.mm(t, b)[:n]
""",
    "full_side_first": """\
        if len(t) == TILE:
            c = torch.mm(t, b)
        else:
            c = torch.mm(torch.cat([t, t.new_zeros(TILE - n, k)]), b)
        out[s:s + n] = c[:n]
""",
}

# The same loops without what makes every call one shape, or padding with something else on the
# short side.
NOT_PADDED = {
    "no_pad": """\
        out[s:s + n] = torch.mm(t, b)
""",
    "pad_to_other_width": """\
        if n < TILE:
            t = torch.cat([t, t.new_zeros(TILE - n - 1, k)])
        out[s:s + n] = torch.mm(t, b)[:n]
""",
    "half_precision_tail": """\
        if n < TILE:
            t = torch.cat([t, t.new_zeros(TILE - n, k)]).half()
        out[s:s + n] = torch.mm(t.float(), b)[:n]
""",
    "narrower_tail": """\
        if n < TILE:
            t = torch.cat([t, t.new_zeros(TILE - n, k)])
            t = t[:8]
        out[s:s + n] = torch.mm(t, b)[:n]
""",
}


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cand.py"
    path.write_text(HEAD + body + TAIL)
    return path


@pytest.mark.parametrize("name", sorted(PADDED))
def test_a_tile_padded_to_its_width_is_one_shape_for_every_batch(tmp_path: Path, name: str) -> None:
    assert run_static(_write(tmp_path, PADDED[name]), get_task("gemm")) == ([], [])


@pytest.mark.parametrize("name", sorted(NOT_PADDED))
def test_a_tail_tile_of_what_is_left_reaches_the_library_kernel(tmp_path: Path, name: str) -> None:
    violations, _ = run_static(_write(tmp_path, NOT_PADDED[name]), get_task("gemm"))
    assert "library_kernel_by_shape" in [f.rule for f in violations], violations


SPLIT = """\
import torch
import torch.nn.functional as F

TILE = 16


def kernel(a, b):
    outs = []
    for t in a.split(TILE):
        n = t.shape[0]
{pad}        outs.append(torch.mm(t, b)[:n])
    return torch.cat(outs)
"""
PAD = """\
        if n < TILE:
            t = F.pad(t, (0, 0, 0, TILE - n))
"""


def test_split_into_tiles_of_the_batch_is_followed_the_same_way(tmp_path: Path) -> None:
    """``a.split(C)``: tiles of C samples, the last one what is left of the batch (before, each piece
    read as one sample and the unpadded tail was missed)."""
    padded = tmp_path / "padded.py"
    padded.write_text(SPLIT.replace("{pad}", PAD))
    assert run_static(padded, get_task("gemm")) == ([], [])
    bare = tmp_path / "bare.py"
    bare.write_text(SPLIT.replace("{pad}", ""))
    violations, _ = run_static(bare, get_task("gemm"))
    assert [f.rule for f in violations] == ["library_kernel_by_shape"]


# The whole batch padded to a multiple of the tile first, then sliced into full tiles.
WHOLE = """\
import math

import torch
import torch.nn.functional as F
import triton

TILE = 16


def kernel(a, b):
    m = a.shape[0]
    mp = {round}
    ap = F.pad(a, (0, 0, 0, mp - m))
    tiles = [torch.mm(ap[s:s + {width}], b) for s in range(0, {stop}, {step})]
    return torch.cat(tiles)[:m]
"""
ROUNDED = {
    "add_then_floor": "(m + TILE - 1) // TILE * TILE",
    "added_constant": "((m + (TILE - 1)) // TILE) * TILE",
    "tile_first": "TILE * triton.cdiv(m, TILE)",
    "ceil": "math.ceil(m / TILE) * TILE",
}


@pytest.mark.parametrize("name", sorted(ROUNDED))
def test_a_batch_padded_to_a_multiple_of_the_tile_gives_full_tiles(tmp_path: Path, name: str) -> None:
    path = tmp_path / "whole.py"
    path.write_text(WHOLE.format(round=ROUNDED[name], width="TILE", stop="mp", step="TILE"))
    assert run_static(path, get_task("gemm")) == ([], [])
    # The padded rows' count read back from the padded tensor is the same multiple.
    path.write_text(WHOLE.format(round=ROUNDED[name], width="TILE", stop="ap.shape[0]", step="TILE"))
    assert run_static(path, get_task("gemm")) == ([], [])


@pytest.mark.parametrize(
    ("round_", "width", "stop", "step"),
    [
        ("(m // TILE) * TILE", "TILE", "mp", "TILE"),  # rounded down: the tail is dropped, then short
        ("(m + TILE - 1) // TILE * TILE", "TILE", "m", "TILE"),  # steps through the unpadded count
        ("(m + TILE - 1) // TILE * TILE", "TILE", "mp", "8"),  # tiles that overlap the padding's end
        ("(m + 8 - 1) // 8 * 8", "TILE", "mp", "8"),  # a multiple of 8, tiles of 16
    ],
)
def test_tiles_of_a_batch_not_padded_to_their_width_reach_the_library_kernel(
    tmp_path: Path, round_: str, width: str, stop: str, step: str
) -> None:
    path = tmp_path / "short.py"
    path.write_text(WHOLE.format(round=round_, width=width, stop=stop, step=step))
    violations, _ = run_static(path, get_task("gemm"))
    assert "library_kernel_by_shape" in [f.rule for f in violations], violations
