"""The mla_decode task: the paged latent layout, the MLA maths, the seed passes, the schedules are caught."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import nodice
from nodice.cli import app
from nodice.gate.pipeline import check
from nodice.measuring.baselines import baselines_for, load_baselines
from nodice.measuring.baselines.mla_decode import flashinfer_mla_plan_args
from nodice.tasks import get_task
from nodice.tasks._attention import HOPPER_SM_COUNT
from nodice.tasks.mla_decode import DEEPSEEK_SM_SCALE
from tests.fp32_bounds import assert_within, attention_bound

TASK = "mla_decode"
EXAMPLES = Path(nodice.__file__).parent / "examples" / TASK
SEED = EXAMPLES / "seed.py"
VARIANTS = sorted(p for p in EXAMPLES.glob("*.py") if p.stem != "seed")
CPU = torch.device("cpu")


def _batch(
    heads: int = 4, page: int | None = None, n: int = 4, seed: int = 0, mates: tuple = (1, 90)
) -> tuple:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(seed)
    variant = {"heads": heads} | ({"page": page} if page else {})
    problem = task.problem(gen, CPU, torch.float32, **variant)
    samples = [task.sample(problem, gen), *task.samples(problem, gen, n - 1, mate_len=mates)]
    return task, problem, samples, task.compose(problem, samples, gen)


def _pages_of(args: tuple, row: int) -> list[int]:
    n_pages = -(-int(args[5][row]) // args[2].shape[1])
    return args[4][row, :n_pages].tolist()


def _mla(s: dict[str, torch.Tensor], sm_scale: float) -> torch.Tensor:
    """The absorbed-MLA formula, written out: softmax((q_nope·ckvᵀ + q_pe·kpeᵀ)·scale)·ckv."""
    scores = (s["q_nope"] @ s["ckv"].T + s["q_pe"] @ s["kpe"].T) * sm_scale
    return torch.softmax(scores, dim=-1) @ s["ckv"]


def _bound(s: dict[str, torch.Tensor], sm_scale: float) -> torch.Tensor:
    """The reassociation bound of :func:`_mla`: 576-wide keys whose values are their first 512."""
    q = torch.cat([s["q_nope"], s["q_pe"]], dim=-1)
    return attention_bound(q, torch.cat([s["ckv"], s["kpe"]], dim=-1), s["ckv"], sm_scale)


def test_compose_scatters_each_requests_latent_over_the_pool() -> None:
    task = get_task(TASK)
    gen = torch.Generator().manual_seed(0)
    problem = task.problem(gen, CPU, torch.float32, heads=16)
    target = task.sample(problem, gen)
    n = target.meta["length"]
    placements = []
    for _ in range(4):
        mates = task.samples(problem, gen, 3, mate_len=(1, 90))
        args = task.compose(problem, [mates[0], target, *mates[1:]], gen)
        q_nope, q_pe, ckv_cache, kpe_cache, table, seq_lens, sm_scale = args
        assert q_nope.shape == (4, 16, 512) and q_pe.shape == (4, 16, 64)
        assert ckv_cache.shape[1:] == (8, 512) and kpe_cache.shape[1:] == (8, 64)
        assert table.dtype == seq_lens.dtype == torch.int32 and int(seq_lens[1]) == n
        pages = _pages_of(args, 1)
        idx = torch.tensor(pages)
        assert torch.equal(ckv_cache[idx].reshape(-1, 512)[:n], target.tensors["ckv"])
        assert torch.equal(kpe_cache[idx].reshape(-1, 64)[:n], target.tensors["kpe"])
        owned = [p for row in range(4) for p in _pages_of(args, row)]
        assert len(set(owned)) == len(owned) < ckv_cache.shape[0]
        placements.append(tuple(pages))
    assert len(set(placements)) == len(placements), "the target's pages never moved"
    assert 0.75 * DEEPSEEK_SM_SCALE <= sm_scale <= 1.25 * DEEPSEEK_SM_SCALE


@pytest.mark.parametrize("page", [8, 1])
def test_reference_is_the_absorbed_mla_formula_over_the_requests_own_tokens(page: int) -> None:
    task, _, samples, args = _batch(heads=16, page=page, seed=1)
    out = task.reference(*args)
    assert out.shape == args[0].shape
    for i, s in enumerate(samples):
        # The reference and the formula sum in different orders (576-wide keys against 512 + 64):
        # how far apart they land depends on the CPU's BLAS, so the tolerance follows the arithmetic.
        bound = _bound(s.tensors, float(args[6]))
        assert_within(out[i], _mla(s.tensors, args[6]), bound, f"sample {i}")
        if s.meta["length"] > 1:  # ... and is tight enough to tell them from one token fewer
            fewer = {n: t[:-1] if n in ("ckv", "kpe") else t for n, t in s.tensors.items()}
            assert ((out[i] - _mla(fewer, args[6])).abs() > bound).any(), f"sample {i}"


def test_seed_is_correct_and_batch_invariant() -> None:
    r = check(SEED, TASK, device="cpu", seed=0)
    assert r.verdict == "pass", r.reason
    verdicts = {s.name: s.verdict for s in r.stages}
    assert verdicts["static"] == verdicts["correctness"] == verdicts["dynamic"] == "pass", verdicts
    contexts = get_task(TASK).contexts(CPU)
    variants = {repr(sorted(c.params["variant"].items())) for c in contexts}
    assert r.stage("dynamic").stats["contexts"] == len(contexts) + len(variants) + 1


def test_there_are_three_violating_variants() -> None:
    assert {p.stem for p in VARIANTS} >= {
        "split_count_from_batch",
        "tile_from_longest",
        "split_size_from_total_kv",
    }
    for v in VARIANTS:
        assert v.read_text().startswith('"""VIOLATES batch invariance:'), v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_statically(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", correctness=False, dynamic=False)
    assert r.verdict == "bi_violation", r.reason
    finding = next(f for f in r.findings if f.severity == "violation")
    # The flow starts at an argument the batch decides: the batch size or the lengths.
    assert any("q_nope.shape[0]" in step or "seq_lens" in step for step in finding.path), finding.path


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.stem)
def test_violating_variant_is_caught_by_dynamic_validation(variant: Path) -> None:
    r = check(variant, TASK, device="cpu", seed=3, static=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.stage("correctness").verdict == "pass"  # right maths, only invariance fails
    m = r.mismatch
    assert m is not None and m.output == "o" and m.context["batch_size"] > 1
    assert len(m.index) == 2 and m.expected != m.got and 0 < m.differing <= m.total


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_contexts_vary_batchmates_lengths_page_size_and_cross_the_sm_count(device: str) -> None:
    dev = torch.device(device)
    task = get_task(TASK)
    contexts = task.contexts(dev)
    assert len({c.name for c in contexts}) == len(contexts)
    slots = {(c.resolved_position(), c.batch_size) for c in contexts}
    assert any(p == 0 for p, b in slots if b > 1) and any(p == b - 1 for p, b in slots if b > 1)
    assert any(0 < p < b - 1 for p, b in slots)
    _, target_hi = task.problem(torch.Generator().manual_seed(0), dev, torch.float32).dims["lengths"]
    mates = [c.params["mate_len"] for c in contexts]
    assert min(lo for lo, _ in mates) == 1 and max(hi for _, hi in mates) >= 2 * target_hi
    variants = [c.params["variant"] for c in contexts]
    grid = [c.batch_size * v["heads"] for c, v in zip(contexts, variants, strict=True)]
    assert min(grid) < HOPPER_SM_COUNT <= max(grid), grid
    assert any(v.get("page") == 1 for v in variants)  # token-granular placement (FlashInfer-Bench ps1)
    assert any("lengths" in v for v in variants)  # short targets beside long batchmates
    heads = {v["heads"] for v in variants}
    assert heads == ({16, 64, 128} if dev.type == "cuda" else {4, 16})


def test_workloads_are_deepseek_and_kimi_shapes_with_flops_and_bytes() -> None:
    task = get_task(TASK)
    ws = {w.name: w for w in task.workloads()}
    assert {w.params["H"] for w in ws.values()} == {16, 64, 128}
    assert {w.params["page"] for w in ws.values()} == {64}
    assert {"DeepSeek-V3 (TP8)", "DeepSeek-V3 (DP attention)", "Kimi-K2 (DP attention)"} == {
        w.model for w in ws.values()
    }
    batches = {w.params["B"] for w in ws.values()}
    lengths = {w.params["L"] for w in ws.values()}
    assert min(batches) == 1 and max(batches) == 128 and min(lengths) == 1024 and max(lengths) == 32768
    w = ws["dsv3-tp8-b64-kv8k"]
    assert task.flops(w) == 2.0 * 64 * 16 * 8192 * (512 + 64 + 512)
    assert task.bytes_moved(w, torch.bfloat16) == (64 * 16 * 1088 + 64 * 8192 * 576) * 2
    small = task.small_workloads()[0]
    args = task.workload_inputs(small, torch.Generator().manual_seed(0), CPU, torch.float32)
    assert args[0].shape == (small.params["B"], small.params["H"], 512) and args[6] == DEEPSEEK_SM_SCALE
    # DeepSeek-V3's softmax scale: 1/sqrt(192) times the square of its YaRN mscale at factor 40.
    expected = (0.1 * math.log(40) + 1) ** 2 / math.sqrt(192)
    assert expected == pytest.approx(DEEPSEEK_SM_SCALE)


def test_nodice_tasks_pins_the_signature() -> None:
    result = CliRunner().invoke(app, ["tasks"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "mla_decode" in flat
    assert "kernel(q_nope[B,H,512], q_pe[B,H,64], ckv_cache[P,page,512], kpe_cache[P,page,64]," in flat


def test_cpu_baseline_matches_the_reference_and_flashinfer_is_gpu_only() -> None:
    assert {b.name for b in baselines_for(TASK, torch.device("cuda"))} == {
        "FlashInfer MLA",
        "SDPA over gathered latent pages",
    }
    loaded, missing = load_baselines(TASK, CPU)
    assert not missing and list(loaded) == ["SDPA over gathered latent pages"]
    for page in (8, 1):
        task, _, _, args = _batch(heads=16, page=page, seed=5)
        tol = task.tolerance(torch.float32)
        got = loaded["SDPA over gathered latent pages"](*args)
        torch.testing.assert_close(got, task.reference(*args), atol=tol.atol, rtol=tol.rtol)
    if not torch.cuda.is_available():
        _, gpu_missing = load_baselines(TASK, torch.device("cuda"))
        assert (
            "CUDA device" in gpu_missing["FlashInfer MLA"] or "not installed" in gpu_missing["FlashInfer MLA"]
        )


def test_flashinfer_plan_arguments_are_the_csr_form_of_the_block_table() -> None:
    _, _, samples, args = _batch(heads=16, seed=6)
    positional, keywords = flashinfer_mla_plan_args(*args)
    qo_indptr, kv_indptr, kv_indices, kv_len, heads, ckv_dim, kpe_dim, page, causal, scale, *dtypes = (
        positional
    )
    lengths = [s.meta["length"] for s in samples]
    assert qo_indptr.tolist() == list(range(len(samples) + 1))
    assert kv_len.tolist() == lengths and kv_len.dtype == kv_indptr.dtype == kv_indices.dtype == torch.int32
    # Request i's pages are kv_indices[kv_indptr[i]:kv_indptr[i+1]], in its block table's order.
    for i in range(len(samples)):
        assert kv_indices[kv_indptr[i] : kv_indptr[i + 1]].tolist() == _pages_of(args, i)
    assert (heads, ckv_dim, kpe_dim, page, causal, scale) == (16, 512, 64, 8, False, args[6])
    assert dtypes == [torch.float32, torch.float32]
    flashinfer_mla = pytest.importorskip("flashinfer.mla")
    # Every argument binds to this FlashInfer's plan(), in the order it names them.
    plan = inspect.signature(flashinfer_mla.BatchMLAPagedAttentionWrapper.plan)
    bound = plan.bind(None, *positional, **keywords).arguments
    assert bound["kv_len_arr"] is kv_len and bound["head_dim_kpe"] == 64 and bound["sm_scale"] == scale
