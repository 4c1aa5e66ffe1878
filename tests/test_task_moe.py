"""The moe task: routing semantics, steered batchmates, and the gate's verdicts on the examples (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks.moe import expected_active_experts, route
from tests.conftest import EXAMPLES

MOE = EXAMPLES / "moe"
VARIANTS = ["split_k_from_expert_load", "dense_path_small_batch", "atomic_combine"]
CPU = torch.device("cpu")


def assert_close(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    # torch.allclose, not torch.testing: the latter imports torch.distributed on first use (seconds).
    assert torch.allclose(got, expected, atol=atol, rtol=rtol), (got - expected).abs().max()


def _batch(tokens: int, seed: int = 0, **hints: str) -> tuple[object, ...]:
    task = get_task("moe")
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32)
    return task.compose(problem, [task.sample(problem, gen, **hints) for _ in range(tokens)], gen)


def test_reference_is_the_weighted_sum_of_swiglu_experts() -> None:
    x, logits, w_gate_up, w_down, top_k = _batch(6)
    inter = w_down.shape[2]
    expected = torch.zeros_like(x)
    for t in range(x.shape[0]):
        probs = torch.softmax(logits[t], dim=0)
        weights, ids = torch.topk(probs, top_k)
        for w, e in zip(weights / weights.sum(), ids.tolist(), strict=True):
            gate, up = w_gate_up[e, :inter] @ x[t], w_gate_up[e, inter:] @ x[t]
            expected[t] += w * (w_down[e] @ (torch.nn.functional.silu(gate) * up))
    assert_close(get_task("moe").reference(x, logits, w_gate_up, w_down, top_k), expected)


def test_steered_batchmates_land_on_or_avoid_the_home_experts() -> None:
    task = get_task("moe")
    gen = torch.Generator().manual_seed(3)
    problem = task.problem(gen, CPU, torch.float32)
    home = set(problem.shared["home_experts"].tolist())
    for route_name, expect_home in (("toward", True), ("away", False)):
        logits = torch.stack(
            [task.sample(problem, gen, route=route_name).tensors["router_logits"] for _ in range(20)]
        )
        _, ids = route(logits, problem.dims["top_k"])
        chosen = [set(row) for row in ids.tolist()]
        if expect_home:
            assert all(c == home for c in chosen)
        else:
            assert all(not (c & home) for c in chosen)
    with pytest.raises(ValueError, match="unknown route"):
        task.sample(problem, gen, route="sideways")


def test_contexts_cross_tile_sizes_with_both_steering_directions() -> None:
    contexts = get_task("moe").contexts(CPU)
    sizes = {c.batch_size for c in contexts}
    assert {16, 17} <= sizes and max(sizes) >= 64
    assert {c.params["route"] for c in contexts} >= {"toward", "away"}


def test_workloads_are_real_moe_shapes_with_honest_counts() -> None:
    task = get_task("moe")
    qwen = next(w for w in task.workloads() if w.name == "qwen3-30b-a3b-decode16")
    assert (qwen.params["E"], qwen.params["top_k"], qwen.params["H"], qwen.params["I"]) == (128, 8, 2048, 768)
    assert task.flops(qwen) == 6.0 * 16 * 8 * 2048 * 768
    # A 16-token decode step reaches far fewer than all 128 experts; a prefill reaches them all.
    assert 60 < expected_active_experts(16, 128, 8) < 90
    assert expected_active_experts(4096, 128, 8) == pytest.approx(128)


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [1])
def test_seed_passes_correctness_and_dynamic_validation(seed: int) -> None:
    r = check(MOE / "seed.py", "moe", device="cpu", seed=seed, static=False)
    assert r.verdict == "pass", r.reason
    assert [s.name for s in r.stages] == ["load", "correctness", "dynamic"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_violating_variant_is_caught_dynamically(variant: str) -> None:
    r = check(MOE / f"{variant}.py", "moe", device="cpu", seed=0, static=False, correctness=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.differing > 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_computes_correct_values(variant: str) -> None:
    """Variants are rejected for batch dependence, not for wrong answers."""
    r = check(MOE / f"{variant}.py", "moe", device="cpu", seed=2, static=False, dynamic=False)
    assert r.verdict == "pass", r.reason


def test_unnormalised_routing_weights_are_caught_by_correctness(tmp_path: Path) -> None:
    source = (MOE / "seed.py").read_text()
    wrong = source.replace("chosen / total[:, None]", "chosen")
    assert wrong != source
    cand = tmp_path / "no_renormalise.py"
    cand.write_text(wrong)
    r = check(cand, "moe", device="cpu", seed=0, static=False, dynamic=False)
    assert r.verdict == "incorrect"
    assert "outside atol" in r.reason
