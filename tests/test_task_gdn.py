"""The gdn task: the recurrence, realistic inputs, length variants, and the gate's verdicts (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks.gdn import gated_delta_rule
from tests.conftest import EXAMPLES

GDN = EXAMPLES / "gdn"
VARIANTS = ["chunk_size_from_tokens", "packed_stream_chunks", "eager_path_small_batch"]
CPU = torch.device("cpu")


def assert_close(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    # torch.allclose, not torch.testing: the latter imports torch.distributed on first use (seconds).
    assert torch.allclose(got, expected, atol=atol, rtol=rtol), (got - expected).abs().max()


def _batch(batch: int, length: int, seed: int = 0) -> tuple[object, ...]:
    task = get_task("gdn")
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, T=length)
    return task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen)


def test_recurrence_matches_a_per_head_loop() -> None:
    q, k, v, g, beta, scale = _batch(2, 5)
    out = gated_delta_rule(q, k, v, g, beta, scale)
    for b in range(2):
        for h in range(q.shape[2]):
            state = torch.zeros(q.shape[3], v.shape[3])
            for t in range(5):
                state = torch.exp(g[b, t, h]) * state
                u = beta[b, t, h] * (v[b, t, h] - k[b, t, h] @ state)
                state = state + torch.outer(k[b, t, h], u)
                assert_close(out[b, t, h], scale * (q[b, t, h] @ state))


def test_inputs_have_qwen3_next_ranges() -> None:
    q, k, _, g, beta, scale = _batch(3, 16)
    assert_close(k.norm(dim=-1), torch.ones(k.shape[:-1]))
    assert_close(q.norm(dim=-1), torch.ones(q.shape[:-1]))
    assert bool((g < 0).all()) and float(g.min()) > -20.0
    assert bool(((beta > 0) & (beta < 1)).all())
    assert g.dtype == beta.dtype == torch.float32
    assert scale == pytest.approx(q.shape[-1] ** -0.5)


def test_contexts_ask_for_lengths_on_both_sides_of_chunk_sizes() -> None:
    contexts = get_task("gdn").contexts(CPU)
    lengths = {c.params["variant"]["T"] for c in contexts}
    assert 16 in lengths and any(t % 16 for t in lengths) and max(lengths) > 32
    problem = get_task("gdn").problem(torch.Generator().manual_seed(0), CPU, torch.float32, T=33)
    assert problem.dims["T"] == 33


def test_workloads_are_qwen3_next_shapes() -> None:
    task = get_task("gdn")
    longest = max(task.workloads(), key=lambda w: w.params["T"])
    assert longest.params["T"] == 8192 and longest.params["Dk"] == longest.params["Dv"] == 128
    assert {w.params["Hh"] for w in task.workloads()} == {16, 32}
    p = longest.params
    assert task.flops(longest) == 7.0 * p["B"] * p["T"] * p["Hh"] * 128 * 128


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [0])
def test_seed_passes_correctness_and_dynamic_validation(seed: int) -> None:
    r = check(GDN / "seed.py", "gdn", device="cpu", seed=seed, static=False)
    assert r.verdict == "pass", r.reason
    dynamic = r.stage("dynamic")
    assert dynamic is not None and dynamic.stats["contexts"] > len(get_task("gdn").contexts(CPU))


@pytest.mark.parametrize("variant", VARIANTS)
def test_violating_variant_is_caught_dynamically(variant: str) -> None:
    r = check(GDN / f"{variant}.py", "gdn", device="cpu", seed=0, static=False, correctness=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.differing > 0


def test_decay_after_the_update_is_caught_by_correctness(tmp_path: Path) -> None:
    source = (GDN / "seed.py").read_text()
    decay = "        state = state * tl.exp(g)[:, None, None]\n"
    update = "        state = state + k[:, :, None] * u[:, None, :]\n"
    assert decay in source and update in source
    wrong = source.replace(decay, "").replace(update, update + decay)
    cand = tmp_path / "late_decay.py"
    cand.write_text(wrong)
    r = check(cand, "gdn", device="cpu", seed=0, static=False, dynamic=False)
    assert r.verdict == "incorrect"
