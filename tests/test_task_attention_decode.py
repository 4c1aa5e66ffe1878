"""The attention_decode task: paged composition, seed passes the gate on CPU, variants are caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import nodice
from nodice.gate.pipeline import check
from nodice.tasks import get_task
from nodice.tasks._attention import HOPPER_SM_COUNT, SWEEP_LAYOUTS, attend, layouts_for

TASK = "attention_decode"
EXAMPLES = Path(nodice.__file__).parent / "examples" / TASK
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


def _pages_of(args: tuple, row: int) -> list[int]:
    _, k_cache, _, table, seq_lens, _ = args
    n_pages = -(-int(seq_lens[row]) // k_cache.shape[1])
    return table[row, :n_pages].tolist()


def _tokens_of(cache: torch.Tensor, pages: list[int], length: int) -> torch.Tensor:
    return cache[torch.tensor(pages)].reshape(-1, cache.shape[2], cache.shape[3])[:length]


def test_compose_places_the_same_request_in_different_pool_slots() -> None:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(0)
    problem = task.problem(gen, CPU, torch.float32, layout="gqa")
    target = task.sample(problem, gen)
    length = target.meta["length"]
    placements = []
    for _ in range(6):
        mates = task.samples(problem, gen, 3, mate_len=(1, 90))
        batch = [*mates[:1], target, *mates[1:]]
        args = task.compose(problem, batch, gen)
        q, k_cache, v_cache, table, seq_lens, _ = args
        assert table.dtype == seq_lens.dtype == torch.int32
        assert int(seq_lens[1]) == length
        pages = _pages_of(args, 1)
        # The request's tokens are where its block table says, bit for bit ...
        assert torch.equal(_tokens_of(k_cache, pages, length), target.tensors["k"])
        assert torch.equal(_tokens_of(v_cache, pages, length), target.tensors["v"])
        assert torch.equal(q[1], target.tensors["q"])
        # ... no two requests share a page, and the pool has slots nobody owns.
        owned = [p for row in range(4) for p in _pages_of(args, row)]
        assert len(set(owned)) == len(owned) < k_cache.shape[0]
        # Junk, not zeros, past the request's last token.
        tail = k_cache[pages[-1]][length - (len(pages) - 1) * k_cache.shape[1] :]
        assert tail.numel() == 0 or bool((tail != 0).all())
        placements.append(tuple(pages))
    assert len(set(placements)) == len(placements), "the target's pages never moved"


def test_reference_follows_the_block_table() -> None:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(1)
    problem = task.problem(gen, CPU, torch.float32, layout="gqa")
    samples = task.samples(problem, gen, 3)
    args = task.compose(problem, samples, gen)
    out = task.reference(*args)
    for i, s in enumerate(samples):
        k, v = s.tensors["k"].transpose(0, 1), s.tensors["v"].transpose(0, 1)
        expected = attend(s.tensors["q"].unsqueeze(1), k, v, False, args[5]).squeeze(1)
        assert torch.equal(out[i], expected)


# One problem seed per task (the tasks alternate 0 and 1); every other gate test draws its own.
@pytest.mark.parametrize("seed", [0])
def test_seed_is_correct_and_batch_invariant(seed: int) -> None:
    r = check(SEED, TASK, device="cpu", seed=seed)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task(TASK).contexts(CPU)
    variants = {repr(sorted(c.params["variant"].items())) for c in contexts}
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_at_least_two_violating_variants() -> None:
    assert len(VARIANTS) >= 2
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", seed=2, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"  # right maths, only invariance fails
    m = r.mismatch
    assert m is not None and m.output == "o"
    assert m.context["batch_size"] > 1 and "mate_len" in m.context
    assert len(m.index) == 2 and m.expected != m.got and 0 < m.differing <= m.total


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # Pages assumed contiguous from the request's first one: random placement exposes it.
        pytest.param(
            "page = tl.load(table_ptr + req * table_width + toks // PAGE, mask=t_ok, other=0)",
            "page = tl.load(table_ptr + req * table_width) + toks // PAGE",
            id="contiguous_pages",
        ),
        # Whole pages attended: the junk after the last token leaks in.
        pytest.param(
            "t_ok = toks < end",
            "t_ok = toks < tl.minimum(start + SPLIT_TOKENS, tl.cdiv(seq_len, PAGE) * PAGE)",
            id="whole_pages",
        ),
    ],
)
def test_correctness_rejects_paging_bugs(tmp_path: Path, before: str, after: str) -> None:
    source = SEED.read_text()
    assert before in source
    wrong = tmp_path / "paging_bug.py"
    wrong.write_text(source.replace(before, after))
    r = check(wrong, TASK, device="cpu", seed=0, static=False, dynamic=False)
    assert r.verdict == "incorrect", r.reason


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_contexts_span_mate_lengths_layouts_and_the_sm_count(device: str) -> None:
    dev = torch.device(device)
    task = get_task(TASK)
    contexts = task.contexts(dev)
    problem = task.problem(torch.Generator().manual_seed(0), dev, torch.float32)
    _, hi = problem.dims["lengths"]
    mates = [c.params["mate_len"] for c in contexts]
    assert min(m[0] for m in mates) == 1 and max(m[1] for m in mates) >= 3 * hi
    heads = [{**layouts_for(dev), **SWEEP_LAYOUTS}[c.params["variant"]["layout"]] for c in contexts]
    assert any(h.q_heads == h.kv_heads for h in heads) and any(h.q_heads > h.kv_heads for h in heads)
    grid = [c.batch_size * h.q_heads for c, h in zip(contexts, heads, strict=True)]
    assert min(grid) < HOPPER_SM_COUNT <= max(grid), grid
    if dev.type == "cpu":  # every CPU context has real batchmates besides the witnesses
        assert all(c.batch_size > 1 + task.witnesses(dev) for c in contexts)


def test_workloads_cover_the_decode_grid() -> None:
    task = get_task(TASK)
    llama = {(w.params["B"], w.params["L"]) for w in task.workloads() if w.model.startswith("Llama")}
    assert llama == {(b, kv) for b in (1, 8, 32, 128) for kv in (1024, 8192, 32768)}
    w = next(w for w in task.workloads() if w.params["B"] == 8 and w.params["L"] == 8192)
    assert w.params["page"] == 16
    assert task.flops(w) == 4.0 * 8 * 32 * 8192 * 128
    assert task.bytes_moved(w, torch.bfloat16) == 2 * (2 * 8 * 32 * 128 + 2 * 8 * 8192 * 8 * 128)
