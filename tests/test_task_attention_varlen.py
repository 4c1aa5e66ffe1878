"""The attention_varlen task: the packed layout, the seed passes, the batch-dependent schedules are caught."""

from __future__ import annotations

import inspect
from itertools import pairwise
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import nodice
from nodice.gate.pipeline import check
from nodice.measuring.baselines import baselines_for, load_baselines
from nodice.measuring.baselines.attention_varlen import varlen_kwargs
from nodice.tasks import get_task
from nodice.tasks._attention import HOPPER_SM_COUNT, SWEEP_LAYOUTS, layouts_for
from nodice.tasks.base import Workload
from tests.fp32_bounds import assert_within, attention_bound

TASK = "attention_varlen"
EXAMPLES = Path(nodice.__file__).parent / "examples" / TASK
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


def _packed(layout: str = "gqa", causal: bool = True, n: int = 3, seed: int = 0) -> tuple:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, layout=layout, causal=causal)
    samples = [task.sample(problem, gen, mate_len=(1, 50)) for _ in range(n)]
    return task, problem, samples, task.compose(problem, samples, gen)


def _bound(args: tuple) -> torch.Tensor:
    """The reassociation bound of every packed sequence's attention, packed as the output is."""
    q, k, v, cu_q, cu_k, _, _, causal, sm_scale = args
    bounds = [
        attention_bound(*(t.transpose(0, 1) for t in (q[q0:q1], k[k0:k1], v[k0:k1])), sm_scale, causal)
        for (q0, q1), (k0, k1) in zip(pairwise(cu_q.tolist()), pairwise(cu_k.tolist()), strict=True)
    ]
    return torch.cat([b.transpose(0, 1) for b in bounds])


def test_compose_packs_sequences_back_to_back_and_select_finds_each_one() -> None:
    task, _, samples, args = _packed(n=4)
    q, k, _, cu_q, cu_k, max_q, max_k, causal, _ = args
    lengths = [s.meta["length"] for s in samples]
    assert cu_q.dtype == torch.int32 and cu_q.tolist() == [0, *torch.tensor(lengths).cumsum(0).tolist()]
    assert torch.equal(cu_q, cu_k) and cu_q.data_ptr() != cu_k.data_ptr()
    assert q.shape[0] == k.shape[0] == sum(lengths) and max_q == max_k == max(lengths) and causal
    for i, s in enumerate(samples):
        (rows,) = task.select(q, i, args)
        assert torch.equal(rows, s.tensors["q"])
    with pytest.raises(ValueError, match="cu_seqlens"):
        task.select(q, 0)


def test_reference_is_sdpa_of_each_sequence_for_mha_gqa_mqa() -> None:
    for layout in ("mha", "gqa", "mqa"):
        for causal in (True, False):
            task, _, samples, args = _packed(layout, causal, n=3, seed=1)
            out = task.reference(*args)
            for i, s in enumerate(samples):
                q, k, v = (s.tensors[n].transpose(0, 1)[None] for n in ("q", "k", "v"))
                group = q.shape[1] // k.shape[1]
                expected = F.scaled_dot_product_attention(
                    q,
                    k.repeat_interleave(group, dim=1),
                    v.repeat_interleave(group, dim=1),
                    is_causal=causal,
                    scale=args[-1],
                )[0].transpose(0, 1)
                bound = attention_bound(q, k, v, args[-1], causal)[0].transpose(0, 1)
                assert_within(task.select(out, i, args)[0], expected, bound, f"{layout} {causal} {i}")


def test_reference_aligns_a_causal_mask_bottom_right_when_keys_outnumber_queries() -> None:
    # FlashAttention's rule for Sk > Sq (a cached prefix): the last query sees every key.
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(n, 2, 16, generator=gen) for n in (3, 7, 7))
    cu_q, cu_k = torch.tensor([0, 3], dtype=torch.int32), torch.tensor([0, 7], dtype=torch.int32)
    out = task.reference(q, k, v, cu_q, cu_k, 3, 7, True, 0.25)
    scores = torch.einsum("qhd,khd->hqk", q, k) * 0.25
    hidden = torch.arange(7)[None, :] > torch.arange(3)[:, None] + 4
    expected = torch.einsum("hqk,khd->qhd", scores.masked_fill(hidden, float("-inf")).softmax(-1), v)
    assert_within(out, expected, _bound((q, k, v, cu_q, cu_k, 3, 7, True, 0.25)), "bottom-right")


def test_seed_is_correct_and_batch_invariant() -> None:
    r = check(SEED, TASK, device="cpu", seed=0)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task(TASK).contexts(CPU)
    variants = {repr(sorted(c.params["variant"].items())) for c in contexts}
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_three_violating_variants() -> None:
    assert {p.stem for p in VARIANTS} >= {"tile_from_max_seqlen", "split_kv_from_batch", "dense_small_batch"}
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_statically(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation", r.reason
    finding = next(f for f in r.findings if f.severity == "violation")
    # The flow starts at an argument the batch decides: the offsets or the longest sequence.
    assert any("cu_seqlens_q" in step or "max_seqlen_k" in step for step in finding.path), finding.path


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", seed=3, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"  # right maths, only invariance fails
    m = r.mismatch
    assert m is not None and m.output == "o" and m.context["batch_size"] > 1
    assert len(m.index) == 3 and m.expected != m.got and 0 < m.differing <= m.total


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_contexts_cover_pack_order_length_mix_and_thresholds(device: str) -> None:
    dev = torch.device(device)
    task = get_task(TASK)
    contexts = task.contexts(dev)
    heads = {**layouts_for(dev), **SWEEP_LAYOUTS}
    slots = {(c.resolved_position(), c.batch_size) for c in contexts}
    assert any(p == 0 for p, b in slots if b > 1) and any(p == b - 1 for p, b in slots if b > 1)
    assert any(0 < p < b - 1 for p, b in slots)
    target_lo, target_hi = task.problem(torch.Generator().manual_seed(0), dev, torch.float32).dims["lengths"]
    mates = [c.params["mate_len"] for c in contexts]
    assert min(lo for lo, _ in mates) == 1 and max(hi for _, hi in mates) >= 4 * target_hi
    grid = [c.batch_size * heads[c.params["variant"]["layout"]].q_heads for c in contexts]
    assert min(grid) < HOPPER_SM_COUNT <= max(grid), grid
    # The packs' token counts lie on both sides of powers of two (tile and wave thresholds).
    most = [target_hi + (c.batch_size - 1) * c.params["mate_len"][1] for c in contexts]
    fewest = [target_lo + (c.batch_size - 1) * c.params["mate_len"][0] for c in contexts]
    powers = (1024, 16384) if dev.type == "cuda" else (128, 512)
    assert all(min(fewest) < p <= max(most) for p in powers), (min(fewest), max(most))
    assert {"h1", "h2"} <= {c.params["variant"]["layout"] for c in contexts}


def test_workloads_are_real_models_with_flops_and_bytes() -> None:
    task = get_task(TASK)
    ws = {w.name: w for w in task.workloads()}
    assert {(w.params["Hq"], w.params["Hkv"], w.params["D"]) for w in ws.values()} == {
        (32, 8, 128),
        (64, 8, 128),
    }
    assert {"Llama-3-8B", "Qwen3-8B", "Qwen3-32B"} == {w.model for w in ws.values()}
    w = ws["llama3-8b-mix16k-causal"]
    assert sum(w.params["lengths"]) == 16384 and len(w.params["lengths"]) == 34
    assert task.flops(w) == 4.0 * 32 * 128 * (8192**2 + 4096**2 + 32 * 128**2) / 2
    assert task.bytes_moved(w, torch.bfloat16) == 16384 * (2 * 32 + 2 * 8) * 128 * 2 + 2 * 35 * 4
    listed = task.describe()["workloads"]
    assert all("lengths" not in row and row["total_tokens"] >= row["max_seqlen"] for row in listed)
    small = task.small_workloads()[0]
    args = task.workload_inputs(small, torch.Generator().manual_seed(0), CPU, torch.float32)
    assert args[0].shape[0] == sum(small.params["lengths"]) and args[5] == max(small.params["lengths"])


def test_cpu_baseline_matches_the_reference_and_the_gpu_ones_are_listed() -> None:
    assert {b.name for b in baselines_for(TASK, torch.device("cuda"))} == {
        "flash varlen (torch)",
        "cuDNN SDPA per sequence",
        "FlashInfer batch prefill",
        "FlashInfer batch prefill (fixed split)",
    }
    loaded, missing = load_baselines(TASK, CPU)
    assert not missing and list(loaded) == ["torch SDPA per sequence"]
    task, _, _, args = _packed("gqa", True, n=4, seed=5)
    assert_within(loaded["torch SDPA per sequence"](*args), task.reference(*args), _bound(args), TASK)


def test_per_sequence_sdpa_runs_the_shapes_its_backend_refuses_on_the_math_backend() -> None:
    from nodice.measuring.baselines.attention_varlen import sdpa_per_sequence

    # No CPU build has a cuDNN kernel: every sequence is refused. Short ones run on the math backend,
    # a long one is an error rather than a row timed on another backend under cuDNN's name.
    run = sdpa_per_sequence("CUDNN_ATTENTION")()
    task = get_task(TASK)
    short = task.workload_inputs(
        Workload("short", {"lengths": [1, 5, 16], "Hq": 4, "Hkv": 2, "D": 32, "causal": True}),
        torch.Generator().manual_seed(0), CPU, torch.float32,
    )  # fmt: skip
    assert_within(run(*short), task.reference(*short), _bound(short), "short")
    long = task.workload_inputs(
        Workload("long", {"lengths": [3, 17], "Hq": 4, "Hkv": 2, "D": 32, "causal": True}),
        torch.Generator().manual_seed(0), CPU, torch.float32,
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="No viable backend"):
        run(*long)


def test_varlen_keywords_bind_to_this_torchs_varlen_attn() -> None:
    from torch.nn.attention.varlen import varlen_attn

    sig = inspect.signature(varlen_attn)
    kw = varlen_kwargs(sig.parameters, causal=True, gqa=True, sm_scale=0.1)
    sig.bind(*range(7), **kw)  # every keyword is one this torch accepts
    assert kw["scale"] == 0.1 and kw.get("enable_gqa") is True
    assert kw.get("is_causal") is True or kw.get("window_size") == (-1, 0)
    full = varlen_kwargs(sig.parameters, causal=False, gqa=False, sm_scale=0.1)
    assert "window_size" not in full and not full.get("is_causal", False)
    # An older build's signature (is_causal, no enable_gqa) gets the flag instead of the window.
    old = varlen_kwargs(["query", "key", "value", "is_causal", "scale"], causal=True, gqa=False, sm_scale=0.1)
    assert old == {"scale": 0.1, "is_causal": True}
