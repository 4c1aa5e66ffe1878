"""The attention_prefill task: seed passes the gate on CPU, variants are caught, the reference is right."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import nodice
from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks._attention import HOPPER_SM_COUNT, SWEEP_LAYOUTS, layouts_for
from tests.fp32_bounds import assert_within, attention_bound

TASK = "attention_prefill"
EXAMPLES = Path(nodice.__file__).parent / "examples" / TASK
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [1])
def test_seed_is_correct_and_batch_invariant(seed: int) -> None:
    r = check(SEED, TASK, device="cpu", seed=seed)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    # Every context ran, plus one batch-1 rerun per layout variant and the final rerun.
    contexts = get_task(TASK).contexts(CPU)
    variants = {repr(sorted(c.params["variant"].items())) for c in contexts}
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_at_least_two_violating_variants() -> None:
    assert len(VARIANTS) >= 2
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    # Static analysis off: this is about what the batches themselves show.
    r = check(variant, TASK, device="cpu", seed=3, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"  # right maths, only invariance fails
    m = r.mismatch
    assert m is not None and m.output == "o"
    assert m.context["batch_size"] > 1 and "variant" in m.context
    assert len(m.index) == 3 and m.expected != m.got and 0 < m.differing <= m.total


def test_correctness_rejects_a_kernel_that_ignores_sm_scale(tmp_path: Path) -> None:
    # A classic: hard-coding 1/sqrt(D) instead of the caller's scale.
    source = SEED.read_text()
    assert "sm_scale * LOG2E," in source
    wrong = tmp_path / "default_scale.py"
    wrong.write_text(source.replace("sm_scale * LOG2E,", "head_dim**-0.5 * LOG2E,"))
    r = check(wrong, TASK, device="cpu", seed=0, static=False, dynamic=False)
    assert r.verdict == "incorrect", r.reason
    assert "outside atol" in r.reason


def test_reference_matches_sdpa_for_gqa_and_causal() -> None:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(0)
    for layout in ("mha", "gqa", "mqa"):
        for causal in (True, False):
            problem = task.problem(gen, CPU, torch.float32, layout=layout, causal=causal)
            args = task.compose(problem, task.samples(problem, gen, 2), gen)
            q, k, v, is_causal, scale = args
            group = q.shape[1] // k.shape[1]
            expected = F.scaled_dot_product_attention(
                q,
                k.repeat_interleave(group, dim=1),
                v.repeat_interleave(group, dim=1),
                is_causal=is_causal,
                scale=scale,
            )
            bound = attention_bound(q, k, v, scale, is_causal)
            assert_within(task.reference(*args), expected, bound, f"{layout}, causal={causal}")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_contexts_cover_layouts_positions_and_both_sides_of_the_sm_count(device: str) -> None:
    contexts = get_task(TASK).contexts(torch.device(device))
    variants = [c.params["variant"] for c in contexts]
    assert {v["causal"] for v in variants} == {True, False}
    heads = [{**layouts_for(torch.device(device)), **SWEEP_LAYOUTS}[v["layout"]] for v in variants]
    assert any(h.q_heads == h.kv_heads for h in heads) and any(h.q_heads > h.kv_heads for h in heads)
    slots = {(c.resolved_position(), c.batch_size) for c in contexts}
    assert any(p == 0 for p, _ in slots) and any(p == b - 1 for p, b in slots)
    assert any(0 < p < b - 1 for p, b in slots)
    grid = [c.batch_size * h.q_heads for c, h in zip(contexts, heads, strict=True)]
    assert min(grid) < HOPPER_SM_COUNT <= max(grid), grid


def test_workloads_hold_the_32k_token_grid() -> None:
    task = get_task(TASK)
    grid = [w for w in task.workloads() if w.params["S"] >= 4096]
    assert len(grid) == 24  # 4 lengths x 3 head layouts x causal or not
    assert all(w.params["B"] * w.params["S"] == 32768 for w in grid)
    assert {w.params["S"] for w in grid} == {4096, 8192, 16384, 32768}
    assert {(w.params["Hq"], w.params["Hkv"]) for w in grid} == {(16, 16), (32, 8), (32, 4)}
    w = next(w for w in grid if w.params["S"] == 4096 and w.params["causal"] and w.params["Hq"] == 16)
    assert task.flops(w) == 4.0 * 8 * 16 * 4096**2 * 128 / 2
    assert task.bytes_moved(w, torch.bfloat16) == 2 * 8 * 4096 * (2 * 16 + 2 * 16) * 128
