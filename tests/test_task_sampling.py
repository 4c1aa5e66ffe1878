"""The sampling task: filtering semantics, the distributional rule, and the gate's verdicts (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks.sampling import filtered_distribution, rule_violation, tv_bound
from tests.conftest import EXAMPLES

SAMPLING = EXAMPLES / "sampling"
VARIANTS = ["rng_offset_from_row", "batch_seed", "sort_path_small_batch"]
CPU = torch.device("cpu")


def assert_close(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    # torch.allclose, not torch.testing: the latter imports torch.distributed on first use (seconds).
    assert torch.allclose(got, expected, atol=atol, rtol=rtol), (got - expected).abs().max()


def test_top_k_then_top_p_on_the_renormalised_distribution() -> None:
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    probs = torch.softmax(logits.double(), 0)
    # top-p alone: token 1 is kept while the mass above it (p0 ≈ 0.636) is below top_p.
    assert filtered_distribution(logits, 1.0, 0, 0.6).probs.nonzero().flatten().tolist() == [0]
    assert filtered_distribution(logits, 1.0, 0, 0.7).probs.nonzero().flatten().tolist() == [0, 1]
    # top-k first, then top-p on the renormalised top-2: p0/(p0+p1) ≈ 0.73 < 0.8 keeps both.
    both = filtered_distribution(logits, 1.0, 2, 0.8).probs
    assert_close(both[:2], probs[:2] / probs[:2].sum())
    assert both[2:].sum() == 0
    # Temperature sharpens before filtering; top_k 0 and top_p 1 keep everything.
    everything = filtered_distribution(logits, 0.5, 0, 1.0).probs
    assert_close(everything, torch.softmax(logits.double() / 0.5, 0))


def test_tv_bound_holds_for_a_correct_sampler_and_separates_a_wrong_one() -> None:
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(50, generator=gen, dtype=torch.float64) * 2, 0)
    draws = 256
    bound = tv_bound(probs, draws)
    for _ in range(50):
        empirical = torch.bincount(torch.multinomial(probs, draws, True, generator=gen), minlength=50) / draws
        assert 0.5 * float((empirical - probs).abs().sum()) < bound
    uniform = torch.full_like(probs, 1 / 50)
    assert 0.5 * float((uniform - probs).abs().sum()) > bound


def test_reference_sampler_follows_the_filtered_distribution() -> None:
    task = get_task("sampling")
    gen = torch.Generator().manual_seed(5)
    problem = task.problem(gen, CPU, torch.float32)
    row = task.logits_row(problem, gen)
    draws = 2000
    samples = [task.request(problem, row, 0.8, 20, 0.9, s) for s in range(draws)]
    tokens = task.reference(*task.compose(problem, samples, gen))
    exact = filtered_distribution(row, 0.8, 20, 0.9).probs
    empirical = torch.bincount(tokens, minlength=row.numel()).double() / draws
    assert 0.5 * float((empirical - exact).abs().sum()) < tv_bound(exact, draws)


def test_rule_violation_names_the_request() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0], [4.0, 0.0, 3.9]])
    params = (torch.tensor([0.0, 1.0]), torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1.0, 1.0]))
    assert rule_violation(logits, *params, torch.tensor([1, 0])) == ""
    assert "not the argmax 1" in rule_violation(logits, *params, torch.tensor([2, 0]))
    assert "request 1" in rule_violation(logits, *params, torch.tensor([1, 2]))


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [0])
def test_seed_passes_correctness_and_dynamic_validation(seed: int) -> None:
    r = check(SAMPLING / "seed.py", "sampling", device="cpu", seed=seed, static=False)
    assert r.verdict == "pass", r.reason
    correctness = r.stage("correctness")
    assert correctness is not None and correctness.stats["trials"] == 4


@pytest.mark.parametrize("variant", VARIANTS)
def test_violating_variant_is_caught_dynamically(variant: str) -> None:
    r = check(SAMPLING / f"{variant}.py", "sampling", device="cpu", seed=0, static=False, correctness=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.output == "tokens"


# Wrong kernels, each one edit away from the seed, and the words the rejection must contain.
WRONG = {
    "ignores_top_k": (
        "    top_k = tl.where((top_k <= 0) | (top_k > vocab), vocab, top_k)\n",
        "    top_k = tl.full([ROWS], 0, tl.int32) + vocab\n",
        "outside the top-k/top-p set",
    ),
    "samples_at_temperature_0": ("    token = tl.where(greedy, arg_max, token)\n", "", "is not the argmax"),
    "uniform_over_kept_tokens": (
        "        w = tl.where(kept, w, 0.0)\n",
        "        w = tl.where(kept, 1.0, 0.0)\n",
        "total-variation distance",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_wrong_sampler_is_caught_by_correctness(tmp_path: Path, case: str) -> None:
    old, new, expected = WRONG[case]
    source = (SAMPLING / "seed.py").read_text()
    assert old in source
    wrong = source.replace(old, new)
    if case == "uniform_over_kept_tokens":
        # Walk a uniform distribution over the kept tokens (their count, not their mass).
        counted = "tl.sum(tl.where(tl.load(key_ptr + scratch) > lo[:, None], 1.0, 0.0), axis=1)"
        wrong = wrong.replace("    threshold = u * kept_mass\n", f"    threshold = u * {counted}\n")
    cand = tmp_path / f"{case}.py"
    cand.write_text(wrong)
    r = check(cand, "sampling", device="cpu", seed=0, static=False, dynamic=False)
    assert r.verdict == "incorrect"
    assert expected in r.reason
