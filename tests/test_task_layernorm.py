"""The layernorm task: the seed passes the gate on CPU, the violating variants are caught, the reference is
torch's LayerNorm."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import nodice
from nodice.gate.pipeline import check
from nodice.measuring.baselines import load_baselines
from nodice.tasks import CATALOG, get_task

TASK = "layernorm"
EXAMPLES = Path(nodice.__file__).parent / "examples" / TASK
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


def test_is_in_the_catalog_with_its_signature() -> None:
    assert TASK in CATALOG
    task = get_task(TASK)
    assert task.signature.startswith("kernel(x[B,H] bf16, weight[H] bf16, bias[H] bf16, eps: float)")
    assert task.family == "normalization" and task.unit == "GB/s" and task.arity == 4


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [0])
def test_seed_is_correct_and_batch_invariant(seed: int) -> None:
    r = check(SEED, TASK, device="cpu", seed=seed)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task(TASK).contexts(CPU)
    variants = {repr(sorted((c.params.get("variant") or {}).items())) for c in contexts}
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_three_violating_variants_with_their_mechanism() -> None:
    assert len(VARIANTS) >= 3
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_rejected_statically(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.findings and r.findings[0].file.endswith(variant.name)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", seed=0, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"
    m = r.mismatch
    assert m is not None and m.output == "y" and m.context["batch_size"] > 1
    assert m.expected != m.got


def test_reference_is_torchs_layer_norm() -> None:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(0)
    problem = task.problem(gen, CPU, torch.float32)
    x, weight, bias, eps = task.compose(problem, task.samples(problem, gen, 5), gen)
    assert x.shape == (5, problem.dims["H"]) and bias.shape == weight.shape == (problem.dims["H"],)
    want = F.layer_norm(x.double(), (x.shape[1],), weight.double(), bias.double(), eps).float()
    torch.testing.assert_close(task.reference(x, weight, bias, eps), want, rtol=1e-5, atol=1e-5)
    # The rows have a mean away from zero: a kernel that skipped subtracting it would be wrong.
    assert float(x.mean(dim=1).abs().min()) > 0.05


def test_reference_correctness_rejects_a_kernel_without_the_bias(tmp_path: Path) -> None:
    source = SEED.read_text()
    old = "y = (x - mean) * rstd * w + b"
    assert old in source
    wrong = tmp_path / "no_bias.py"
    wrong.write_text(source.replace(old, "y = (x - mean) * rstd * w"))
    r = check(wrong, TASK, device="cpu", seed=0, static=False)
    assert r.verdict == "incorrect" and r.reason.startswith("correctness: batch=1: y[0,")


def test_workloads_are_real_models_and_count_their_bytes() -> None:
    task = get_task(TASK)
    models = {w.model for w in task.workloads()}
    assert {"Falcon-7B", "GPT-NeoX-20B", "BLOOM-176B"} <= models
    w = next(w for w in task.workloads() if w.name == "falcon-7b-prefill")
    assert task.bytes_moved(w, torch.bfloat16) == (2 * 8192 * 4544 + 2 * 4544) * 2
    x, weight, bias, eps = task.workload_inputs(w, torch.Generator().manual_seed(1), CPU, torch.float32)
    assert x.shape == (8192, 4544) and bias.shape == weight.shape == (4544,) and eps == 1e-5


def test_the_torch_baseline_runs_on_cpu_and_is_batch_invariant() -> None:
    from nodice.measuring.baselines import audit_baseline

    loaded, missing = load_baselines(TASK, CPU)
    assert "torch F.layer_norm" in loaded, missing
    audit = audit_baseline(TASK, loaded["torch F.layer_norm"], CPU, 0, name="torch F.layer_norm")
    assert audit.verdict == "pass", audit.detail
