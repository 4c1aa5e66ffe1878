"""FlashInfer prefill and quack norm baselines on CPU: layout conversions, plan() arguments, refusals.

FlashInfer's kernels run on CUDA only; here a torch stand-in takes the place of
its ``plan()``/``run()`` (one SDPA call per packed sequence), so the adapters'
conversions are checked end to end against the tasks' references.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from importlib import metadata
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from nodice.audit import audit_named_baseline
from nodice.gate.correctness import compare
from nodice.measuring.baselines import BaselineUnavailable, baselines_for, find_baseline, load_baselines
from nodice.measuring.baselines.flashinfer_prefill import (
    CONFIGURATIONS,
    SPLIT_TOKENS,
    WORKSPACE_BYTES,
    RaggedBatch,
    dense_from_ragged,
    dense_prefill,
    flashinfer_ragged,
    plan_arguments,
    ragged_from_dense,
    ragged_from_varlen,
    refusal,
    varlen_prefill,
    workspace_bytes,
)
from nodice.measuring.baselines.norms import quack_layer_norm
from nodice.tasks import get_task

CPU = torch.device("cpu")
CUDA = torch.device("cuda")
NAMES = ("FlashInfer batch prefill", "FlashInfer batch prefill (fixed split)")


def sdpa_ragged(batch: RaggedBatch) -> Callable[[], torch.Tensor]:
    """What FlashInfer's plan()/run() compute, one packed sequence at a time (equal q and k lengths)."""
    bounds = list(zip(batch.qo_indptr.tolist(), batch.kv_indptr.tolist(), strict=True))

    def call() -> torch.Tensor:
        out = torch.empty_like(batch.q)
        for (q0, k0), (q1, k1) in pairwise(bounds):
            q, k, v = (t.transpose(0, 1) for t in (batch.q[q0:q1], batch.k[k0:k1], batch.v[k0:k1]))
            o = F.scaled_dot_product_attention(
                q, k, v, is_causal=batch.causal, scale=batch.sm_scale, enable_gqa=q.shape[0] != k.shape[0]
            )
            out[q0:q1] = o.transpose(0, 1)
        return out

    return call


def _args(task_name: str, batch: int, seed: int = 0, **variant: object) -> tuple[object, ...]:
    task = get_task(task_name)
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, **variant)
    return task.compose(problem, task.samples(problem, gen, batch), gen)


def test_dense_batch_packs_each_sequence_as_consecutive_rows() -> None:
    q, k, v = torch.randn(3, 4, 5, 8), torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8)
    batch = ragged_from_dense(q, k, v, True, 0.3)
    assert batch.q.shape == (15, 4, 8) and batch.k.shape == (15, 2, 8) and batch.v.shape == (15, 2, 8)
    assert all(t.is_contiguous() for t in (batch.q, batch.k, batch.v))
    assert batch.qo_indptr.dtype == torch.int32 and batch.qo_indptr.tolist() == [0, 5, 10, 15]
    assert torch.equal(batch.kv_indptr, batch.qo_indptr)
    # Row b·S + s holds token s of sequence b, every head.
    assert torch.equal(batch.q[2 * 5 + 3], q[2, :, 3]) and torch.equal(batch.v[4], v[0, :, 4])
    assert (batch.causal, batch.sm_scale) == (True, 0.3)
    back = dense_from_ragged(batch.q, 3, 5)
    assert back.shape == q.shape and torch.equal(back, q)


def test_varlen_batch_is_the_pack_as_it_is() -> None:
    args = _args("attention_varlen", 4)
    batch = ragged_from_varlen(*args)
    assert batch.q is args[0] and batch.k is args[1] and batch.v is args[2]
    assert batch.qo_indptr.dtype == torch.int32 and torch.equal(batch.qo_indptr, args[3])
    assert torch.equal(batch.kv_indptr, args[4]) and (batch.causal, batch.sm_scale) == (args[7], args[8])


def test_plan_arguments_name_the_batch_and_pin_the_split() -> None:
    q, k = torch.randn(12, 8, 64, dtype=torch.bfloat16), torch.randn(12, 2, 64, dtype=torch.bfloat16)
    indptr = torch.tensor([0, 5, 12], dtype=torch.int32)
    batch = RaggedBatch(q, k, k, indptr, indptr, True, 0.125)
    for configuration, (init, pins) in CONFIGURATIONS.items():
        positional, keywords = plan_arguments(batch, pins)
        assert positional == (indptr, indptr, 8, 2, 64)
        assert keywords["causal"] is True and keywords["sm_scale"] == 0.125
        assert keywords["q_data_type"] == keywords["kv_data_type"] == torch.bfloat16
        assert keywords.get("fixed_split_size") == (SPLIT_TOKENS if configuration == "fixed" else None)
        assert init["backend"] == ("fa2" if configuration == "fixed" else "auto")


def test_plan_arguments_fit_the_installed_flashinfer() -> None:
    prefill = pytest.importorskip("flashinfer.prefill")
    cls = prefill.BatchPrefillWithRaggedKVCacheWrapper
    plan = inspect.signature(cls.plan).parameters
    init = inspect.signature(cls.__init__).parameters
    q = torch.zeros(4, 2, 64, dtype=torch.float16)
    batch = RaggedBatch(q, q, q, torch.tensor([0, 4], dtype=torch.int32), torch.tensor([0, 4]), False, 1.0)
    for wrapper_keywords, pins in CONFIGURATIONS.values():
        positional, keywords = plan_arguments(batch, pins)
        names = list(plan)[1 : 1 + len(positional)]
        assert names == ["qo_indptr", "kv_indptr", "num_qo_heads", "num_kv_heads", "head_dim_qk"]
        assert set(keywords) <= set(plan) and set(wrapper_keywords) <= set(init)


@pytest.mark.parametrize("variant", [{"layout": "gqa", "causal": True}, {"layout": "mha", "causal": False}])
def test_dense_adapter_computes_attention_prefill(variant: dict[str, object]) -> None:
    task = get_task("attention_prefill")
    args = _args("attention_prefill", 3, **variant)
    out = dense_prefill(sdpa_ragged, "stand-in")(*args)
    assert out.shape == args[0].shape
    ok, detail, _ = compare(task, out, task.reference(*args), torch.float32)
    assert ok, detail


@pytest.mark.parametrize("causal", [True, False])
def test_varlen_adapter_computes_attention_varlen(causal: bool) -> None:
    task = get_task("attention_varlen")
    args = _args("attention_varlen", 5, seed=1, layout="gqa", causal=causal)
    assert len(set((args[3][1:] - args[3][:-1]).tolist())) > 1  # type: ignore[index]  # lengths differ
    impl = varlen_prefill(sdpa_ragged, "stand-in")
    out = impl(*args)
    ok, detail, _ = compare(task, out, task.reference(*args), torch.float32)
    assert ok, detail
    assert torch.equal(impl.prepare(*args)(), out)


def test_tensors_flashinfer_cannot_take_are_refused_with_the_reason() -> None:
    half = torch.zeros(4, 2, 128, dtype=torch.bfloat16)
    assert "bfloat16 or float16" in refusal(half.float(), half.float())
    assert "head dim 32" in refusal(half[..., :32], half[..., :32])
    assert refusal(half, half) == "FlashInfer prefill runs on CUDA tensors, not cpu"


def test_prefill_baselines_are_gpu_only_and_say_why_they_do_not_load_here() -> None:
    for task_name in ("attention_prefill", "attention_varlen"):
        assert not set(NAMES) & {b.name for b in baselines_for(task_name, CPU)}
        listed = [b for b in baselines_for(task_name, CUDA) if b.name in NAMES]
        assert [b.name for b in listed] == list(NAMES)
        assert all(b.provider == "flashinfer-python" and "plan()" in b.note for b in listed)
        _, missing = load_baselines(task_name, CUDA)
        if not torch.cuda.is_available():
            assert all(missing[n].startswith("flashinfer-python: ") for n in NAMES), missing
    row = audit_named_baseline("FlashInfer batch prefill", "attention_varlen", "cpu", 0)
    assert row.verdict == "error" and "runs on cuda, not cpu" in row.detail
    assert find_baseline("FlashInfer batch prefill (fixed split)", CUDA, "attention_prefill")[0] == (
        "attention_prefill"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
def test_installed_flashinfer_refuses_a_machine_without_cuda() -> None:
    try:
        metadata.version("flashinfer-python")
    except metadata.PackageNotFoundError:
        pytest.skip("flashinfer-python is not installed")
    with pytest.raises(BaselineUnavailable, match="need a CUDA device"):
        flashinfer_ragged("auto")


def test_missing_flashinfer_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail as it does where the package is not installed.
    monkeypatch.setitem(sys.modules, "flashinfer", None)
    monkeypatch.delitem(sys.modules, "flashinfer.prefill", raising=False)
    with pytest.raises(
        BaselineUnavailable, match=r"^flashinfer-python is not installed \(no module 'flashinfer"
    ):
        flashinfer_ragged("fixed")


def test_quack_norms_are_listed_on_cuda_and_refused_with_a_reason() -> None:
    for task_name, name in (("rmsnorm", "quack RMSNorm"), ("layernorm", "quack LayerNorm")):
        (baseline,) = [b for b in baselines_for(task_name, CUDA) if b.name == name]
        assert baseline.provider == "quack-kernels" and baseline.devices == ("cuda",)
        assert name not in {b.name for b in baselines_for(task_name, CPU)}
        loaded, missing = load_baselines(task_name, CUDA)
        if name not in loaded:
            assert missing[name].startswith("quack-kernels"), missing[name]


# ---- bench/gpu/audit_libraries.py: the jobs' rows gathered into the report bench/audit_table.py reads ----


def _script(relative: str) -> Any:
    path = Path(__file__).resolve().parents[1] / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_audit_jobs_are_gathered_into_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = [
        ("attention_varlen", "FlashInfer batch prefill"),
        ("attention_prefill", "FlashInfer batch prefill (fixed split)"),
        ("gdn", "fla chunk_gated_delta_rule"),
        ("kda", "fla chunk_kda"),
    ]
    (tmp_path / "jobs.tsv").write_text("".join(f"{i}\t{t}\t{n}\n" for i, (t, n) in enumerate(jobs)))
    (tmp_path / "missing.json").write_text(
        json.dumps({"rmsnorm": {"quack RMSNorm": "quack-kernels is not installed"}})
    )
    row = {
        "target": jobs[0][1],
        "task": jobs[0][0],
        "verdict": "bi_violation",
        "mechanism": "dynamic: gqa,causal",
        "detail": "target differs in context gqa,causal,batch=2: o[3, 1, 7] expected 0.5, got 0.49",
    }
    # A library's own output may come before the rows.
    (tmp_path / "0.json").write_text(
        "[flashinfer] compiling batch_prefill\n" + json.dumps([row], indent=2) + "\n"
    )
    (tmp_path / "0.rc").write_text("1\n")
    (tmp_path / "1.json").write_text("")
    (tmp_path / "1.err").write_text("ninja: building fa2 prefill\n")
    (tmp_path / "1.rc").write_text("124\n")
    (tmp_path / "2.err").write_text("")  # started, then stopped with every other job
    audit_libraries = _script("bench/gpu/audit_libraries.py")
    assert audit_libraries.collect(tmp_path, tmp_path / "audit.json", "400", "audit_libraries.sh") == 0
    report = json.loads((tmp_path / "audit.json").read_text())
    varlen = report["tasks"]["attention_varlen"]["baselines_bi"]["FlashInfer batch prefill"]
    assert varlen == {"verdict": "bi_violation", "detail": row["detail"], "mechanism": row["mechanism"]}
    fixed = report["tasks"]["attention_prefill"]["baselines_bi"]["FlashInfer batch prefill (fixed split)"]
    assert fixed["verdict"] == "error" and fixed["detail"].startswith("timed out after 400 s")
    assert fixed["detail"].endswith("last: ninja: building fa2 prefill")
    assert "while running" in report["tasks"]["gdn"]["baselines_bi"]["fla chunk_gated_delta_rule"]["detail"]
    assert report["tasks"]["kda"]["baselines_bi"]["fla chunk_kda"]["detail"].startswith("not run")
    assert report["tasks"]["rmsnorm"]["baselines_missing"] == {
        "quack RMSNorm": "quack-kernels is not installed"
    }
    assert list(report["tasks"])[:2] == ["rmsnorm", "attention_prefill"]  # catalog order
    assert report["versions"]["flashinfer-python"] and report["versions"]["torch"] == torch.__version__

    capsys.readouterr()
    assert _script("bench/audit_table.py").main([str(tmp_path / "audit.json")]) == 0
    table = capsys.readouterr().out
    assert f"| flashinfer-python {report['versions']['flashinfer-python']} | 2 | 2 | 1 | 1 |" in table
    assert "| quack-kernels | quack RMSNorm | rmsnorm | missing | quack-kernels is not installed |" in table
    assert "| flashinfer-python | FlashInfer batch prefill | attention_varlen | bi_violation |" in table
    assert "query tile from its mean query length" in table


def test_quack_layer_norm_adapter_hands_fp32_affine_parameters_and_computes_the_task() -> None:
    task = get_task("layernorm")
    gen = torch.Generator().manual_seed(2)
    problem = task.problem(gen, CPU, torch.bfloat16)
    args = task.compose(problem, task.samples(problem, gen, 4), gen)
    seen: list[tuple[torch.dtype, torch.dtype]] = []

    def layernorm_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        # What quack's kernel asserts, and what it computes (fp32 statistics, one rounding).
        assert x.dim() == 2 and weight.dtype == bias.dtype == torch.float32
        seen.append((weight.dtype, bias.dtype))
        return F.layer_norm(x.float(), (x.shape[-1],), weight, bias, eps).to(x.dtype)

    impl = quack_layer_norm(layernorm_fwd)
    call = impl.prepare(*args)
    ok, detail, _ = compare(task, call(), task.reference(*args), torch.bfloat16)
    assert ok, detail
    assert args[1].dtype == torch.bfloat16 and seen == [(torch.float32, torch.float32)]


def test_the_fixed_split_workspace_is_sized_from_the_batch() -> None:
    # The H200 runs of 2026-12-02: with a 1 GiB float workspace, plan() overflowed on exactly the
    # SPEC-grid rows whose split partials need more (lab/results/candidates_h200_2026-12-02_evening);
    # sized without GQA's packing of query heads into rows, it still overflowed on the GQA rows the
    # buffer grown by earlier rows did not cover (lab/results/h200_2026-12-02_night/call1).
    failed = {"mha16-s16k", "mha16-s32k", "gqa32x8-s8k", "gqa32x8-s16k", "gqa32x8-s32k"}
    failed |= {"gqa32x4-s8k", "gqa32x4-s16k", "gqa32x4-s32k"}
    for name, heads, kv_heads in (("mha16", 16, 16), ("gqa32x8", 32, 8), ("gqa32x4", 32, 4)):
        for seq in (4096, 8192, 16384, 32768):
            batch = 32768 // seq
            indptr = torch.arange(0, (batch + 1) * seq, seq, dtype=torch.int32)
            q = torch.empty(batch * seq, heads, 128, dtype=torch.bfloat16, device="meta")
            kv = torch.empty(batch * seq, kv_heads, 128, dtype=torch.bfloat16, device="meta")
            ragged = RaggedBatch(q, kv, kv, indptr, indptr, True, 0.1)
            need = workspace_bytes(ragged, SPLIT_TOKENS)
            assert (need > WORKSPACE_BYTES) == (f"{name}-s{seq // 1024}k" in failed)
            # FlashInfer's own count: Hq x (packed query tiles x KV chunks) x 128 rows, fp32 O and LSE.
            group, chunks = heads // kv_heads, -(-seq // SPLIT_TOKENS)
            rows = batch * (-(-seq * group // 128)) * chunks * 128
            assert need >= (rows * heads * 129 * 4 if chunks > 1 else 0)
            assert workspace_bytes(ragged, None) == WORKSPACE_BYTES  # no split, no partials
