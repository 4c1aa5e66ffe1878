"""The dsa task: per-row top-k over a paged latent cache; the seed passes, batch-dependent schedules fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import nodice
from nodice.gate.pipeline import check
from nodice.gate.static import run_static
from nodice.measuring.baselines import baselines_for, load_baselines
from nodice.tasks import get_task
from nodice.tasks._attention import HOPPER_SM_COUNT
from nodice.tasks.dsa import topk_positions
from tests.fp32_bounds import assert_within, attention_bound

TASK = "dsa"
EXAMPLES = Path(nodice.__file__).parent / "examples" / TASK
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


def _batch(regime: str = "prefill", n: int = 3, seed: int = 0, **hints: object) -> tuple:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, regime=regime, heads=4)
    samples = [task.sample(problem, gen, **hints) for _ in range(n)]
    return task, problem, samples, task.compose(problem, samples, gen)


def _bound(args: tuple) -> torch.Tensor:
    """The reassociation bound of every row's attention over the tokens it chose."""
    q, kv_cache, indices, _, sm_scale, d_v = args
    tokens = kv_cache.reshape(-1, q.shape[-1])
    bounds = []
    for t in range(q.shape[0]):
        keys = tokens[indices[t][indices[t] >= 0].long()]
        bounds.append(attention_bound(q[t], keys, keys[:, :d_v], sm_scale))
    return torch.stack(bounds)


def test_topk_positions_choose_causally_in_score_order_with_tail_padding() -> None:
    gen = torch.Generator().manual_seed(1)
    pos = topk_positions(rows=5, length=40, topk=64, gen=gen, device=CPU)
    assert pos.shape == (5, 64) and pos.dtype == torch.int32
    for j in range(5):
        horizon = 40 - 5 + j  # row j's own position: it may choose tokens 0 … horizon
        used = pos[j][pos[j] >= 0]
        assert used.numel() == horizon + 1 and set(used.tolist()) == set(range(horizon + 1))
        assert bool((pos[j, horizon + 1 :] == -1).all())  # padding only at the tail
        assert not bool((used[1:] >= used[:-1]).all())  # not in position order
    full = topk_positions(rows=1, length=300, topk=64, gen=gen, device=CPU)
    assert bool((full >= 0).all()) and full.unique().numel() == 64 and int(full.max()) < 300


def test_compose_scatters_pages_and_select_finds_each_request() -> None:
    task, problem, samples, args = _batch(n=4, mate_len=(10, 120), mate_rows=(1, 6))
    q, kv_cache, indices, cu, _, d_v = args
    page, d_qk = problem.dims["page"], d_v + problem.dims["d_rope"]
    rows = [s.meta["rows"] for s in samples]
    assert cu.dtype == torch.int32 and cu.tolist() == [0, *torch.tensor(rows).cumsum(0).tolist()]
    assert kv_cache.shape[1:] == (page, d_qk) and indices.shape == (sum(rows), problem.dims["topk"])
    tokens = kv_cache.reshape(-1, d_qk)
    for i, s in enumerate(samples):
        (q_rows,) = task.select(q, i, args)
        assert torch.equal(q_rows, s.tensors["q"])
        (own,) = task.select(indices, i, args)
        used = s.tensors["positions"] >= 0
        assert torch.equal(own >= 0, used)
        # Each used slot holds the token the row chose, wherever its page landed.
        assert torch.equal(tokens[own[used].long()], s.tensors["kv"][s.tensors["positions"][used].long()])
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        task.select(q, 0)
    # Another batch of the same requests puts them on other pages.
    again = task.compose(problem, samples, torch.Generator().manual_seed(9))
    assert not torch.equal(again[2], indices)


def test_reference_is_softmax_over_each_rows_own_slots() -> None:
    task, _, _, args = _batch(n=3, seed=2)
    q, kv_cache, indices, _, sm_scale, d_v = args
    out = task.reference(*args)
    tokens = kv_cache.reshape(-1, q.shape[-1])
    for t in range(q.shape[0]):
        keys = tokens[indices[t][indices[t] >= 0].long()]
        probs = torch.softmax(q[t] @ keys.T * sm_scale, dim=-1)
        bound = attention_bound(q[t], keys, keys[:, :d_v], sm_scale)
        assert_within(out[t], probs @ keys[:, :d_v], bound, f"row {t}")
    # A row with no used entry gives zeros, as FlashInfer-Bench's reference does.
    empty = indices.clone()
    empty[0] = -1
    assert bool((task.reference(q, kv_cache, empty, args[3], sm_scale, d_v)[0] == 0).all())


def test_seed_is_correct_and_batch_invariant() -> None:
    r = check(SEED, TASK, device="cpu", seed=0)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task(TASK).contexts(CPU)
    variants = {repr(sorted(c.params["variant"].items())) for c in contexts}
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_four_violating_variants() -> None:
    assert {p.stem for p in VARIANTS} >= {
        "split_topk_from_batch",
        "tile_from_longest_request",
        "dense_small_batch",
        "union_in_slot_order",
    }
    for v in VARIANTS:
        assert (ast.get_docstring(ast.parse(v.read_text())) or "").startswith("VIOLATES batch invariance:")


@pytest.mark.parametrize(
    ("variant", "rule"),
    [
        ("split_topk_from_batch", "reduction_range_from_batch"),
        ("tile_from_longest_request", "reduction_tile_from_batch"),
        ("dense_small_batch", "algorithm_selection_by_batch"),
        ("union_in_slot_order", "sample_order_from_batch"),
    ],
)
def test_violating_variant_is_caught_statically(variant: str, rule: str) -> None:
    violations, _ = run_static(EXAMPLES / f"{variant}.py", get_task(TASK))
    assert rule in {f.rule for f in violations}, [(f.rule, f.message) for f in violations]
    finding = next(f for f in violations if f.rule == rule)
    # The flow starts at an argument the batch decides: the query rows or their index lists.
    assert any("q.shape[0]" in step or "indices" in step for step in finding.path), finding.path


def test_the_union_keyed_on_a_comparison_mask_is_caught_statically(tmp_path: Path) -> None:
    # ``indices >= 0`` keeps the index lists' batch axis, as ``indices.ge(0)`` does: the union of
    # the entries it selects is a batch statistic, and the per-row sort keyed on it is found.
    source = (EXAMPLES / "union_in_slot_order.py").read_text()
    assert "used = indices.ge(0)\n" in source
    compared = tmp_path / "union_compared.py"
    compared.write_text(source.replace("used = indices.ge(0)\n", "used = indices >= 0\n"))
    violations, _ = run_static(compared, get_task(TASK))
    rules = {f.rule for f in violations}
    assert "sample_order_from_batch" in rules, [(f.rule, f.message) for f in violations]


def test_keeping_the_indexers_order_after_the_union_is_not_a_finding(tmp_path: Path) -> None:
    # The same compact gather without the per-row sort keeps each row's own order: invariant.
    source = (EXAMPLES / "union_in_slot_order.py").read_text()
    unsorted = tmp_path / "union_unsorted.py"
    unsorted.write_text(source.replace("    where = torch.sort(where, dim=1).values\n", ""))
    violations, _ = run_static(unsorted, get_task(TASK))
    assert violations == [], [(f.rule, f.message) for f in violations]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", seed=3, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"  # right maths, only invariance fails
    m = r.mismatch
    assert m is not None and m.output == "o" and m.expected != m.got and 0 < m.differing <= m.total
    assert len(m.index) == 3
    if variant.stem == "union_in_slot_order":
        # Slot order follows page placement: two batch-1 runs on other pages already differ.
        assert m.context["name"] == "batch=1,rerun" or m.context["batch_size"] > 1
    else:
        assert m.context["batch_size"] > 1


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_contexts_cover_regimes_placement_lengths_and_thresholds(device: str) -> None:
    dev = torch.device(device)
    task = get_task(TASK)
    contexts = task.contexts(dev)
    problem = task.problem(torch.Generator().manual_seed(0), dev, torch.float32, regime="decode")
    topk, (_, target_hi) = problem.dims["topk"], problem.dims["lengths"]
    assert {c.params["variant"]["regime"] for c in contexts} == {"decode", "prefill"}
    slots = {(c.resolved_position(), c.batch_size) for c in contexts}
    assert any(p == 0 for p, b in slots if b > 1) and any(p == b - 1 for p, b in slots if b > 1)
    assert any(0 < p < b - 1 for p, b in slots)
    # Mates of one token, and mates whose index lists are full while a target's may not be.
    mates = [c.params["mate_len"] for c in contexts]
    assert min(lo for lo, _ in mates) == 1 and max(lo for lo, _ in mates) > topk
    assert problem.dims["lengths"][0] < topk < target_hi
    # Decode batches with prefill mates (a chunked-prefill step), and row counts across the
    # thresholds of a 132-way split heuristic (132 // rows ≥ 4 alone, < 4 in the largest batch).
    assert any(c.params["variant"]["regime"] == "decode" and c.params["mate_rows"][1] > 1 for c in contexts)
    decode_rows = [c.batch_size for c in contexts if c.params["mate_rows"] == (1, 1)]
    assert HOPPER_SM_COUNT // max(decode_rows) < 4


def test_workloads_are_deepseek_v32_with_flops_and_bytes() -> None:
    task = get_task(TASK)
    ws = {w.name: w for w in task.workloads()}
    assert {w.model for w in ws.values()} == {"DeepSeek-V3.2"}
    assert {
        (w.params["d_v"], w.params["d_rope"], w.params["topk"], w.params["page"]) for w in ws.values()
    } == {(512, 64, 2048, 64)}
    assert {w.params["H"] for w in ws.values()} == {16, 64, 128}
    assert any(w.params["rows"] == 1 for w in ws.values()) and any(w.params["rows"] > 1 for w in ws.values())
    d = ws["v32-h128-decode-b32-kv8k"]
    assert task.flops(d) == 2.0 * 128 * (512 + 576) * 32 * 2048
    p = ws["v32-h128-prefill-b1-q4k-kv8k"]
    # Rows at positions 4096 … 8191 all see more than 2048 tokens.
    assert task.flops(p) == 2.0 * 128 * (512 + 576) * 4096 * 2048
    assert (
        task.bytes_moved(d, torch.bfloat16)
        == (32 * 128 * (576 + 512) + 32 * 2048 * 576) * 2 + 32 * 2048 * 4 + 33 * 4
    )
    small = task.small_workloads()[1]
    args = task.workload_inputs(small, torch.Generator().manual_seed(0), CPU, torch.float32)
    assert args[0].shape[0] == small.params["rows"] and args[2].shape == (small.params["rows"], 64)
    assert "DeepSeek-V3.2" in {w["model"] for w in task.describe()["workloads"]}


def test_cpu_baseline_matches_the_reference() -> None:
    assert [b.name for b in baselines_for(TASK, torch.device("cuda"))] == ["SDPA over gathered top-k"]
    loaded, missing = load_baselines(TASK, CPU)
    assert not missing and list(loaded) == ["SDPA over gathered top-k"]
    task, _, _, args = _batch("decode", n=5, seed=5, mate_len=(1, 200))
    empty = args[2].clone()
    empty[1] = -1  # a row that attends to nothing
    args = (args[0], args[1], empty, *args[3:])
    assert_within(loaded["SDPA over gathered top-k"](*args), task.reference(*args), _bound(args), TASK)
