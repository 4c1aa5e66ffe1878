"""The add_rmsnorm task: the seed passes the gate on CPU, the violating variants are caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import nodice
from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks.base import Workload

EXAMPLES = Path(nodice.__file__).parent / "examples" / "add_rmsnorm"
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [1])
def test_seed_is_correct_and_batch_invariant(seed: int) -> None:
    r = check(SEED, "add_rmsnorm", device="cpu", seed=seed)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task("add_rmsnorm").contexts(CPU)
    variants = {repr(sorted((c.params.get("variant") or {}).items())) for c in contexts}
    # Every context, one batch-1 rerun per problem variant (the shape sweep is one), the final rerun.
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_at_least_two_violating_variants() -> None:
    assert len(VARIANTS) >= 2
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_also_rejected_statically(variant: Path) -> None:
    r = check(variant, "add_rmsnorm", device="cpu", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.findings and r.findings[0].file.endswith(variant.name)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    # Static analysis off: this is about what the batches themselves show.
    r = check(variant, "add_rmsnorm", device="cpu", seed=0, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"
    m = r.mismatch
    assert m is not None
    # The add is elementwise and stays invariant; the normalised output is what breaks.
    assert m.output == "y"
    assert m.context["batch_size"] > 1 and m.context["name"].startswith("batch=")
    assert len(m.index) == 1 and 0 <= m.index[0] < 1024
    assert m.expected != m.got
    assert 0 < m.differing <= m.total == 1024


# Realistic slips in the fused kernel, each a one-line change of the seed.
_WRONG = {
    # Normalises the sublayer output instead of the updated residual stream.
    "norm_of_x": (
        "r = (x + res).to(res_out_ptr.dtype.element_ty).to(tl.float32)",
        "r = x",
        "y[0,",
    ),
    # Forgets the add in the residual it hands to the next layer.
    "residual_out_is_x": (
        "tl.store(res_out_ptr + base + start + offs, r, mask=mask)",
        "tl.store(res_out_ptr + base + start + offs, x.to(res_out_ptr.dtype.element_ty), mask=mask)",
        "residual_out[0,",
    ),
}


@pytest.mark.parametrize("name", sorted(_WRONG))
def test_reference_correctness_rejects_a_wrong_fusion(name: str, tmp_path: Path) -> None:
    old, new, where = _WRONG[name]
    source = SEED.read_text()
    assert old in source
    wrong = tmp_path / f"{name}.py"
    wrong.write_text(source.replace(old, new))
    r = check(wrong, "add_rmsnorm", device="cpu", seed=0, static=False)
    assert r.verdict == "incorrect"
    assert r.reason.startswith(f"correctness: batch=1: {where}")


def test_compose_and_select_map_each_sample_to_its_own_row() -> None:
    task = get_task("add_rmsnorm")
    gen = torch.Generator().manual_seed(3)
    problem = task.problem(gen, CPU, torch.float32)
    samples = [task.sample(problem, gen) for _ in range(4)]
    x, residual, weight, eps = task.compose(problem, samples, gen)
    assert x.shape == residual.shape == (4, problem.dims["H"])
    assert weight is problem.shared["weight"] and eps == problem.shared["eps"]
    batch_out = task.reference(x, residual, weight, eps)
    for i, s in enumerate(samples):
        assert torch.equal(x[i], s.tensors["x"]) and torch.equal(residual[i], s.tensors["residual"])
        y, residual_out = task.select(batch_out, i)
        y_alone, residual_out_alone = task.select(task.reference(*task.compose(problem, [s], gen)), 0)
        assert torch.equal(residual_out, residual_out_alone)
        torch.testing.assert_close(y, y_alone, rtol=0, atol=1e-6)


def test_reference_normalises_the_rounded_residual_sum() -> None:
    """In bf16, ``y`` is RMSNorm of ``residual_out`` as stored, not of the exact fp32 sum."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((3, 512), generator=gen).to(torch.bfloat16)
    residual = (torch.randn((3, 512), generator=gen) * 40).to(torch.bfloat16)
    weight = (1 + 0.1 * torch.randn((512,), generator=gen)).to(torch.bfloat16)
    y, residual_out = get_task("add_rmsnorm").reference(x, residual, weight, 1e-6)
    assert residual_out.dtype == y.dtype == torch.bfloat16
    assert torch.equal(residual_out, x + residual)
    assert torch.equal(y, get_task("rmsnorm").reference(residual_out, weight, 1e-6))


def test_describes_itself() -> None:
    d = get_task("add_rmsnorm").describe()
    assert (d["name"], d["family"], d["arity"], d["sample"]) == ("add_rmsnorm", "normalization", 4, "one row")
    assert "residual_out[B,H]" in d["signature"]
    assert get_task("add_rmsnorm").output_names == ("y", "residual_out")
    hidden = {w["H"] for w in d["workloads"]}
    assert {4096, 5120, 8192} <= hidden
    tokens = [w["B"] for w in d["workloads"]]
    assert min(tokens) <= 256 and max(tokens) >= 8192


def test_flops_and_bytes() -> None:
    task = get_task("add_rmsnorm")
    w = Workload("tiny", {"B": 2, "H": 8})
    assert task.flops(w) == 5 * 2 * 8
    assert task.bytes_moved(w, torch.bfloat16) == (4 * 2 * 8 + 8) * 2
    args = task.workload_inputs(w, torch.Generator().manual_seed(0), CPU, torch.float32)
    assert [tuple(t.shape) for t in args[:3]] == [(2, 8), (2, 8), (8,)]


@pytest.mark.gpu
def test_seed_passes_on_cuda_in_bf16() -> None:
    r = check(SEED, "add_rmsnorm", device="cuda", seed=0)
    assert r.verdict == "pass", r.reason
    assert r.dtype == "bfloat16"


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_on_cuda(variant: Path) -> None:
    r = check(variant, "add_rmsnorm", device="cuda", seed=0, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.output == "y"
