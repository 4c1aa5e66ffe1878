"""The gemm task: the seed passes the gate on CPU, the violating variants are caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import nodice
from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks.base import Workload
from tests.fp32_bounds import assert_within, matmul_bound

EXAMPLES = Path(nodice.__file__).parent / "examples" / "gemm"
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [1])
def test_seed_is_correct_and_batch_invariant(seed: int) -> None:
    r = check(SEED, "gemm", device="cpu", seed=seed)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task("gemm").contexts(CPU)
    variants = {repr(sorted((c.params.get("variant") or {}).items())) for c in contexts}
    # Every context, one batch-1 rerun per problem variant (the shape sweep is one), the final rerun.
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_at_least_two_violating_variants() -> None:
    assert len(VARIANTS) >= 2
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_also_rejected_statically(variant: Path) -> None:
    r = check(variant, "gemm", device="cpu", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.findings and r.findings[0].file.endswith(variant.name)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    # Static analysis off: this is about what the batches themselves show.
    r = check(variant, "gemm", device="cpu", seed=0, static=False)
    assert r.verdict == "bi_violation", r.reason
    # Correct maths: only batch invariance fails.
    assert r.stage("correctness").verdict == "pass"
    m = r.mismatch
    assert m is not None
    assert m.output == "c"
    assert m.context["batch_size"] > 1 and m.context["name"].startswith("M=")
    assert len(m.index) == 1 and 0 <= m.index[0] < 256
    assert m.expected != m.got
    assert 0 < m.differing <= m.total == 256


def test_reference_correctness_rejects_a_k_loop_that_drops_the_last_block(tmp_path: Path) -> None:
    source = SEED.read_text()
    loop = "for k in range(0, K, BLOCK_K):"
    assert loop in source
    wrong = tmp_path / "short_k_loop.py"
    wrong.write_text(source.replace(loop, "for k in range(0, K - BLOCK_K, BLOCK_K):"))
    r = check(wrong, "gemm", device="cpu", seed=0, static=False)
    assert r.verdict == "incorrect"
    assert r.reason.startswith("correctness: batch=1: c[0,")


def test_compose_and_select_map_each_sample_to_its_own_row() -> None:
    task = get_task("gemm")
    gen = torch.Generator().manual_seed(3)
    problem = task.problem(gen, CPU, torch.float32)
    samples = [task.sample(problem, gen) for _ in range(5)]
    a, b = task.compose(problem, samples, gen)
    assert a.shape == (5, problem.dims["K"]) and a.is_contiguous()
    assert b is problem.shared["b"] and b.shape == (problem.dims["K"], problem.dims["N"])
    batch_out = task.reference(a, b)
    for i, s in enumerate(samples):
        assert torch.equal(a[i], s.tensors["a"])
        (row,) = task.select(batch_out, i)
        (alone,) = task.select(task.reference(*task.compose(problem, [s], gen)), 0)
        # One row alone and in a batch may take different BLAS paths: equal up to reassociation.
        bound = matmul_bound(s.tensors["a"], b)
        assert_within(row, alone, bound, f"row {i} alone")
        assert_within(row, (s.tensors["a"].double() @ b.double()).float(), bound, f"row {i} exactly")


def test_contexts_cross_the_small_m_and_tile_thresholds() -> None:
    task = get_task("gemm")
    cpu_sizes = {c.batch_size for c in task.contexts(CPU)}
    assert {16, 17, 64, 65} <= cpu_sizes
    gpu_sizes = {c.batch_size for c in task.contexts(torch.device("cuda"))}
    assert {64, 65, 128, 129, 512, 513} <= gpu_sizes and max(gpu_sizes) > 132 * 128


def test_gpu_contexts_include_a_long_k_layer_where_split_k_schedules_act() -> None:
    t = get_task("gemm")
    long_k = [c for c in t.contexts(torch.device("cuda")) if "variant" in c.params]
    assert long_k and all(c.name.startswith("long-k,") for c in long_k)
    dims = long_k[0].params["variant"]
    assert dims["K"] >= 2 * dims["N"]
    # Small row counts, where a split-K schedule would run, on both sides of the tile thresholds.
    assert {16, 17, 64, 65} <= {c.batch_size for c in long_k}
    # The problem follows the variant (checked on CPU with small dims).
    p = t.problem(torch.Generator().manual_seed(0), torch.device("cpu"), torch.float32, K=96, N=32)
    assert p.dims == {"K": 96, "N": 32} and tuple(p.shared["b"].shape) == (96, 32)
    assert not any("variant" in c.params for c in t.contexts(torch.device("cpu")))


def test_describes_itself_with_real_model_shapes() -> None:
    d = get_task("gemm").describe()
    assert (d["name"], d["family"], d["arity"]) == ("gemm", "gemm", 2)
    assert d["signature"].startswith("kernel(a[M,K] bf16, b[K,N] bf16) -> c[M,N] bf16")
    shapes = {(w["K"], w["N"]) for w in d["workloads"]}
    # Llama-3-8B's QKV, O, gate_up and down projections.
    assert {(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)} <= shapes
    assert any(w["model"].startswith("Qwen3") for w in d["workloads"])
    assert {w["M"] for w in d["workloads"]} == {1, 64, 512, 4096, 16384}


def test_flops_and_bytes() -> None:
    task = get_task("gemm")
    w = Workload("tiny", {"M": 2, "K": 3, "N": 5})
    assert task.flops(w) == 2 * 2 * 3 * 5
    assert task.bytes_moved(w, torch.bfloat16) == (2 * 3 + 3 * 5 + 2 * 5) * 2
    args = task.workload_inputs(w, torch.Generator().manual_seed(0), CPU, torch.float32)
    assert [tuple(t.shape) for t in args] == [(2, 3), (3, 5)]


@pytest.mark.gpu
def test_seed_passes_on_cuda_in_bf16() -> None:
    r = check(SEED, "gemm", device="cuda", seed=0)
    assert r.verdict == "pass", r.reason
    assert r.dtype == "bfloat16"


# tile_config_from_m is left out: whether a deeper K step alone changes the bits on a GPU
# depends on the MMA instructions each config compiles to.
@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["split_k_from_m", "gemv_path_small_m"])
def test_violating_variant_is_caught_on_cuda(variant: str) -> None:
    r = check(EXAMPLES / f"{variant}.py", "gemm", device="cuda", seed=0, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.expected != r.mismatch.got
