"""What a pure-torch entry point returns: values the batch decided (a per-sample axis cut into a
batch-dependent number of pieces and reduced, the batch size in the arithmetic) are findings;
values that depend on the batch only through which branch ran are left to the algorithm-choice
rule, and cuts of the batch axis or cuts with fixed sizes are nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

HEAD = "import functools\n\nimport torch\n\n\n"
NORM = "    return (xf * torch.rsqrt(sq / x.shape[-1] + eps) * weight.float()).to(x.dtype)\n"

VIOLATING = {
    # The hidden axis in more pieces for small batches: the row's sum of squares is added up differently.
    "chunks_from_rows": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    parts = 4 if x.shape[0] < 32 else 1\n"
        "    sq = sum(p.pow(2).sum(-1, keepdim=True) for p in torch.chunk(xf, parts, dim=-1))\n" + NORM,
        "work_partitioning",
    ),
    "split_size_from_rows": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    width = x.shape[-1] // (8 if len(x) <= 16 else 1)\n"
        "    sq = torch.stack([p.pow(2).sum(-1) for p in xf.split(width, dim=1)]).sum(0).unsqueeze(-1)\n"
        + NORM,
        "work_partitioning",
    ),
    # The same through a cached plan keyed on numel and slices of the hidden axis.
    "cached_plan_slices": (
        "@functools.lru_cache(maxsize=None)\n"
        "def _plan(numel, hidden):\n"
        "    return 8 if numel // hidden <= 16 else 1\n\n\n"
        "def kernel(x, weight, eps):\n"
        "    pieces = _plan(x.numel(), x.shape[-1])\n"
        "    xf = x.float()\n"
        "    width = x.shape[-1] // pieces\n"
        "    sq = torch.zeros(x.shape[0], 1, dtype=torch.float32, device=x.device)\n"
        "    for i in range(pieces):\n"
        "        sq = sq + xf[:, i * width:(i + 1) * width].pow(2).sum(-1, keepdim=True)\n" + NORM,
        "work_partitioning",
    ),
    # Rows viewed as groups whose count follows the batch, each group summed, then the groups.
    "view_groups_from_rows": (
        "def kernel(x, weight, eps):\n"
        "    b, h = x.shape\n"
        "    g = 4 if b < 16 else 1\n"
        "    xf = x.float()\n"
        "    sq = xf.view(b, g, h // g).pow(2).sum(-1).sum(-1, keepdim=True)\n" + NORM,
        "work_partitioning",
    ),
    # Small batches accumulated in double precision.
    "dtype_from_rows": (
        "def kernel(x, weight, eps):\n"
        "    acc = torch.float64 if x.shape[0] < 8 else torch.float32\n"
        "    xf = x.to(acc)\n"
        "    sq = xf.pow(2).sum(-1, keepdim=True)\n" + NORM,
        "algorithm_selection",
    ),
    # The same pieces reduced by an einsum, or by a product with a column of ones.
    "einsum_over_pieces": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    parts = 4 if x.shape[0] < 32 else 1\n"
        "    sq = torch.zeros(x.shape[0], device=x.device)\n"
        "    for p in torch.chunk(xf, parts, dim=-1):\n"
        "        sq = sq + torch.einsum('bh,bh->b', p, p)\n"
        "    sq = sq[:, None]\n" + NORM,
        "work_partitioning",
    ),
    "matmul_over_pieces": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    parts = 4 if x.shape[0] < 32 else 1\n"
        "    sq = torch.zeros(x.shape[0], 1, device=x.device)\n"
        "    for p in torch.chunk(xf, parts, dim=-1):\n"
        "        sq = sq + (p * p) @ torch.ones(p.shape[-1], 1, device=x.device)\n" + NORM,
        "work_partitioning",
    ),
    # The batch size itself in the arithmetic.
    "batch_size_in_scale": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    sq = (xf * xf).sum(-1, keepdim=True) * (1.0 + 1e-7 * (x.shape[0] > 4))\n" + NORM,
        "algorithm_selection",
    ),
}
INVARIANT = {
    # Pieces of the batch axis: each row stays whole.
    "chunks_of_rows": (
        "def kernel(x, weight, eps):\n"
        "    outs = []\n"
        "    for part in torch.chunk(x, 4 if len(x) > 64 else 1, dim=0):\n"
        "        pf = part.float()\n"
        "        r = torch.rsqrt(pf.pow(2).mean(-1, keepdim=True) + eps)\n"
        "        outs.append((pf * r * weight.float()).to(x.dtype))\n"
        "    return torch.cat(outs)\n"
    ),
    # A fixed cut of the hidden axis: the same partial sums whatever the batch.
    "fixed_chunks": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    sq = sum(p.pow(2).sum(-1, keepdim=True) for p in torch.chunk(xf, 4, dim=-1))\n" + NORM
    ),
    # A batch-dependent regrouping reduced over every group at once: one sum over the row, as
    # torch folds contiguous reduced axes into one (the oracle finds no bit changed).
    "view_groups_summed_at_once": (
        "def kernel(x, weight, eps):\n"
        "    b, h = x.shape\n"
        "    g = 4 if b < 16 else 1\n"
        "    xf = x.float()\n"
        "    sq = xf.view(b, g, h // g).pow(2).sum(dim=(1, 2)).unsqueeze(-1)\n" + NORM
    ),
    # An einsum over pieces of a fixed count.
    "einsum_over_fixed_pieces": (
        "def kernel(x, weight, eps):\n"
        "    xf = x.float()\n"
        "    sq = sum(torch.einsum('bh,bh->b', p, p) for p in torch.chunk(xf, 4, dim=-1))[:, None]\n" + NORM
    ),
    # A fixed regrouping of the hidden axis.
    "fixed_view_groups": (
        "def kernel(x, weight, eps):\n"
        "    b, h = x.shape\n"
        "    xf = x.float()\n"
        "    sq = xf.view(b, 4, h // 4).pow(2).sum(dim=(1, 2)).unsqueeze(-1)\n" + NORM
    ),
    # Only which side of a branch ran depends on the batch, and both sides are the same computation.
    "early_return_for_empty": (
        "def kernel(x, weight, eps):\n"
        "    if x.shape[0] == 0:\n"
        "        return torch.empty_like(x)\n"
        "    xf = x.float()\n"
        "    sq = (xf * xf).sum(-1, keepdim=True)\n" + NORM
    ),
}


def _findings(tmp_path: Path, name: str, body: str) -> list:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + body)
    violations, _ = run_static(path, get_task("rmsnorm"))
    return violations


@pytest.mark.parametrize("name", sorted(VIOLATING))
def test_batch_decided_output_values_are_found(tmp_path: Path, name: str) -> None:
    body, mechanism = VIOLATING[name]
    found = [f for f in _findings(tmp_path, name, body) if f.rule == "batch_value_in_kernel_output"]
    assert found, f"{name}: nothing found"
    assert found[0].mechanism == mechanism
    assert found[0].path and found[0].path[-1].endswith("kernel returns them")


@pytest.mark.parametrize("name", sorted(INVARIANT))
def test_outputs_the_batch_does_not_decide_are_clean(tmp_path: Path, name: str) -> None:
    assert _findings(tmp_path, name, INVARIANT[name]) == []
