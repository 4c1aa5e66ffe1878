"""FlashInfer-Bench's public dataset as it publishes it: its definitions mapped, judged, or refused.

The definitions in ``nodice/examples/flashinfer_bench`` whose names carry real sizes are copies of
FlashInfer-Bench's published files (its ``flashinfer-trace`` dataset); ``tests/flashinfer_trace``
holds published definitions nodice refuses. Everything is read with the real ``flashinfer-bench``
package's models; every solution runs through the whole gate on CPU.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from flashinfer_bench.data import Definition, Solution

from nodice.errors import DefinitionError
from nodice.gate.pipeline import check
from nodice.integrations.flashinfer_bench import prepare
from nodice.tasks import get_task
from nodice.tasks.definition import adapter_for, definition_task_name
from nodice.tasks.definition_moe import (
    packed_routes,
    quantize_blocks,
    quantize_experts,
    quantize_rows,
    up_gate,
)
from tests.conftest import EXAMPLES
from tests.fp32_bounds import attention_bound, latent_decode_bound, paged_decode_bound

FIB = EXAMPLES / "flashinfer_bench"
REFUSED = Path(__file__).parent / "flashinfer_trace"

# Published definitions among the examples: the catalog task and the interface each maps to.
PUBLISHED = {
    "rmsnorm_h4096": ("rmsnorm", "without residual"),
    "fused_add_rmsnorm_h4096": ("add_rmsnorm", "with residual"),
    "gemm_n4096_k4096": ("gemm", ""),
    "gqa_paged_decode_h32_kv8_d128_ps1": ("attention_decode", "decode, page size 1"),
    "gqa_paged_decode_h32_kv8_d128_ps64": ("attention_decode", "decode"),
    "gqa_paged_prefill_causal_h32_kv8_d128_ps1": ("attention_varlen", "prefill, page size 1"),
    "gqa_paged_prefill_causal_h32_kv8_d128_ps64": ("attention_varlen", "prefill"),
    "gqa_ragged_prefill_causal_h32_kv8_d128": ("attention_varlen", "prefill"),
    "mla_paged_decode_h16_ckv512_kpe64_ps1": ("mla_decode", "decode, page size 1"),
    "mla_paged_decode_h16_ckv512_kpe64_ps64": ("mla_decode", "decode"),
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": ("dsa", "sparse attention"),
    "top_k_sampling_from_probs_v128256": ("sampling", "top-k"),
    "top_p_sampling_from_probs_v128256": ("sampling", "top-p"),
    "top_k_top_p_sampling_from_probs_v128256": ("sampling", "top-k then top-p"),
    "trtllm_fp4_block_scale_moe_topk8_e128_h2048_i768": ("moe", "renormalize routing, fp32 weights"),
    "trtllm_fp4_block_scale_routed_moe_topk8_e128_h2048_i768": (
        "moe",
        "precomputed renormalize routing, fp32 weights",
    ),
    "moe_fp8_block_scale_renorm_topk8_e128_h2048_i768": ("moe", "renormalize routing, fp8 block scales"),
    "trtllm_fp8_per_tensor_scale_moe_topk8_e128_h2048_i768": (
        "moe",
        "renormalize routing, fp8 per-expert scales",
    ),
}

# A batch-invariant solution of every published definition small enough for the CPU gate, and of the
# CPU-sized copies of the MoE ones (their real weights are GBs of fp32).
SOLUTIONS = sorted(
    p.stem
    for p in FIB.glob("*_torch_*.json")
    if json.loads(p.read_text())["definition"] in PUBLISHED or "_e8_h256_i128" in p.stem
)

# Published definitions nodice does not judge, and the reason its line gives.
REFUSALS = {
    "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1": "MLA prefill attends several query tokens per request",
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": "DeepSeek-V3 routing",
    "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192": "Llama-4 routing",
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": "the DSA top-k indexer returns token indices",
    "gdn_decode_qk4_v8_d128_k_last": "op_type 'gdn' maps to no nodice task (its gated delta rule",
    "mla_ragged_prefill_causal_h16_qk192_vo128": "op_type 'mla_ragged' maps to no nodice task",
}


def _definition(name: str) -> Definition:
    return Definition.model_validate_json((FIB / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_definition_maps_onto_its_catalog_task(name: str) -> None:
    d = _definition(name)
    task_name, kind = PUBLISHED[name]
    adapter = adapter_for(d)
    assert (adapter.task, adapter.kind) == (task_name, kind)
    task = get_task(definition_task_name(FIB / f"{name}.json"))
    # The const axes are the definition's (on CPU too); messages name its outputs.
    assert task.pinned == {dim: d.const_axes[axis] for dim, axis in adapter.const_dims.items()}  # type: ignore[attr-defined]
    assert task.output_names[: len(d.outputs)] == tuple(d.outputs)


def test_fused_add_rmsnorm_is_an_rmsnorm_definition_with_a_residual_input(tmp_path: Path) -> None:
    """FlashInfer-Bench files fused add + RMSNorm under op_type rmsnorm; its residual input tells it apart."""
    fused, plain = _definition("fused_add_rmsnorm_h4096"), _definition("rmsnorm_h4096")
    assert fused.op_type == plain.op_type == "rmsnorm"
    assert list(fused.inputs) == ["hidden_states", "residual", "weight"] and list(fused.outputs) == ["output"]
    task = get_task(definition_task_name(FIB / "fused_add_rmsnorm_h4096.json"))
    # The residual stream the catalog task also returns is supplied, and named as what it is.
    assert task.output_names == ("output", "hidden_states + residual")
    # A definition that declares the updated residual as a second output has it judged under its name.
    data = json.loads((FIB / "fused_add_rmsnorm_h4096.json").read_text())
    data["outputs"]["residual_out"] = data["outputs"]["output"]
    data["reference"] = data["reference"].replace(
        "return y.to(hidden_states.dtype)", "return y.to(hidden_states.dtype), x.to(hidden_states.dtype)"
    )
    assert adapter_for(Definition.model_validate(data)).task == "add_rmsnorm"
    definition = tmp_path / "fused_add_rmsnorm_h4096.json"
    definition.write_text(json.dumps(data))
    writes_both = "output[i : i + 1] = (x * inv_rms * w).to(output.dtype)"
    for residual_out, verdict in (("x", "pass"), ("x * 2", "incorrect")):
        solution, _ = _edited_solution(
            tmp_path,
            "fused_add_rmsnorm_h4096_torch_row",
            "def run(hidden_states, residual, weight, output):",
            "def run(hidden_states, residual, weight, output, residual_out):",
        )
        solution, _ = _edited_solution(
            tmp_path,
            solution,
            writes_both,
            f"{writes_both}\n        residual_out[i : i + 1] = ({residual_out}).to(residual_out.dtype)",
        )
        r = _judge(solution, definition, tmp_path / verdict, static=False)
        assert r.verdict == verdict, (r.reason, r.error)
    correctness = r.stage("correctness")
    assert correctness is not None and ": residual_out[" in correctness.detail


def _lse_free(out: object) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out  # type: ignore[return-value,index]


def _bf16_rounded(bound: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """The bound on a value the definition's reference rounds to bf16 (unit roundoff 2⁻⁸) after computing
    it within ``bound`` of ``exact``."""
    return bound + 2.0**-8 * (exact.double().abs() + bound)


def _varlen_bound(args: tuple) -> torch.Tensor:
    q, k, v, cu_q, cu_k, _, _, _, sm_scale = args
    rows = []
    for (q0, q1), (k0, k1) in zip(pairwise(cu_q.tolist()), pairwise(cu_k.tolist()), strict=True):
        b = attention_bound(
            q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1), sm_scale, True
        )
        rows.append(b.transpose(0, 1))
    return torch.cat(rows)


@pytest.mark.parametrize(
    "name",
    [
        "gqa_paged_decode_h32_kv8_d128_ps64",
        "gqa_paged_prefill_causal_h32_kv8_d128_ps1",
        "gqa_paged_prefill_causal_h32_kv8_d128_ps64",
        "gqa_ragged_prefill_causal_h32_kv8_d128",
        "mla_paged_decode_h16_ckv512_kpe64_ps64",
    ],
)
def test_definition_reference_on_adapted_arguments_is_the_catalog_tasks(name: str) -> None:
    """The page lists (and, for a paged prefill, the pool the adapter builds) hand the definition's own
    reference the catalog task's attention; it rounds to bf16, the catalog's stays in fp32."""
    task = get_task(definition_task_name(FIB / f"{name}.json"))
    catalog = get_task(task.adapter.task)  # type: ignore[attr-defined]
    gen = torch.Generator().manual_seed(3)
    problem = task.problem(gen, torch.device("cpu"), torch.float32)
    args = task.compose(problem, task.samples(problem, gen, 4), gen)
    ours, theirs = _lse_free(task.reference(*args)), catalog.reference(*args)
    assert ours.dtype == torch.bfloat16  # FlashInfer-Bench's reference allocates its output in bf16
    bound = {
        "attention_decode": paged_decode_bound,
        "mla_decode": latent_decode_bound,
    }.get(catalog.name, lambda *a: _varlen_bound(a))(*args)
    diff = (ours.double() - theirs.double()).abs()
    assert bool((diff <= _bf16_rounded(bound, theirs)).all()), float(diff.max())


def test_moe_adapters_hand_over_the_catalog_tasks_experts_and_routes() -> None:
    """The up and gate halves swap places; fp8 tokens and weights dequantize to within fp8 e4m3's
    rounding (3 stored mantissa bits: 2⁻⁴ relative; half its smallest subnormal, 2⁻¹⁰, times the scale);
    the packed routes decode to the top-k experts and their softmax weights rounded to bf16."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 2 * 128, 256, generator=gen)
    swapped = up_gate(w)
    assert torch.equal(swapped[:, :128], w[:, 128:]) and torch.equal(swapped[:, 128:], w[:, :128])

    def within_fp8(deq: torch.Tensor, exact: torch.Tensor, scale: torch.Tensor) -> None:
        assert bool(((deq - exact).abs() <= 2.0**-4 * exact.abs() + 2.0**-10 * scale).all())

    q, s = quantize_blocks(w)
    deq = (q.float().view(3, 2, 128, 2, 128) * s[:, :, None, :, None]).view_as(w)
    within_fp8(deq, w, s.repeat_interleave(128, 1).repeat_interleave(128, 2))
    x = torch.randn(5, 256, generator=gen)
    xq, xs = quantize_rows(x)
    assert xs.shape == (2, 5)  # FlashInfer-Bench's [H/128, T] layout
    within_fp8(
        (xq.float().view(5, 2, 128) * xs.t()[..., None]).view(5, 256), x, xs.t().repeat_interleave(128, 1)
    )
    eq, es = quantize_experts(w)
    within_fp8(eq.float() * es[:, None, None], w, es[:, None, None])

    logits = torch.randn(4, 8, generator=gen)
    ids = packed_routes(logits, 2)
    experts = ids >> 16
    weights = (ids & 0xFFFF).to(torch.int16).view(torch.bfloat16).float()
    top, expected = torch.topk(logits, 2)
    assert torch.equal(experts.long(), expected)
    assert torch.equal(weights, torch.softmax(top, dim=-1).to(torch.bfloat16).float())


@pytest.mark.parametrize("solution", SOLUTIONS)
def test_correct_solution_passes_the_whole_gate(solution: str, tmp_path: Path) -> None:
    s = Solution.model_validate_json((FIB / f"{solution}.json").read_text())
    prepared = prepare(FIB / f"{solution}.json", FIB / f"{s.definition}.json", tmp_path)
    r = check(str(prepared.candidate), prepared.task, device="cpu", entry=prepared.entry, seed=7)
    assert r.verdict == "pass", (r.reason, r.error, [f.message for f in r.findings])
    assert [st.name for st in r.stages if st.verdict == "pass"][-2:] == ["correctness", "dynamic"]


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_published_definition_no_catalog_task_computes_is_refused_with_its_reason(name: str) -> None:
    d = Definition.model_validate_json((REFUSED / f"{name}.json").read_text())
    with pytest.raises(DefinitionError) as exc:
        adapter_for(d)
    assert REFUSALS[name] in exc.value.line() and exc.value.line().startswith(
        f"bad definition: definition {name}"
    )


def _edited_solution(tmp_path: Path, solution: str | Path, old: str, new: str) -> tuple[Path, Path]:
    file = solution if isinstance(solution, Path) else FIB / f"{solution}.json"
    data = json.loads(file.read_text())
    source = data["sources"][0]["content"]
    assert old in source
    data["sources"][0]["content"] = source.replace(old, new)
    path = tmp_path / f"{file.stem.removesuffix('_edited')}_edited.json"
    path.write_text(json.dumps(data))
    return path, FIB / f"{data['definition']}.json"


def _judge(solution: Path, definition: Path, folder: Path, **stages: bool):  # type: ignore[no-untyped-def]
    prepared = prepare(solution, definition, folder)
    return check(str(prepared.candidate), prepared.task, device="cpu", entry=prepared.entry, seed=5, **stages)


def test_sampling_target_first_still_shows_a_batch_dependent_draw(tmp_path: Path) -> None:
    """Seedless samplers draw from torch's generator: the target, first in its batch, gets the same
    numbers in every batch, unless the solution's order of draws follows the batch (last row first)."""
    solution, definition = _edited_solution(
        tmp_path,
        "top_k_sampling_from_probs_v128256_torch_row",
        "for i in range(probs.shape[0]):",
        "for i in reversed(range(probs.shape[0])):",
    )
    r = _judge(solution, definition, tmp_path / "src", correctness=False)
    assert r.verdict == "bi_violation" and r.mismatch is not None
    assert r.mismatch.output == "samples" and r.mismatch.context["position"] == 0
    task = get_task(definition_task_name(definition))
    # Each definition's filter: what it does not take filters nothing, in its inputs and in the check.
    assert task.parameters(0.7, 5, 0.9) == (0.7, 5, 1.0)  # type: ignore[attr-defined]
    assert (
        all(c.position == 0 for c in task.contexts(torch.device("cpu")))
        and task.witnesses(torch.device("cpu")) == 0
    )


def test_messages_name_the_definitions_outputs(tmp_path: Path) -> None:
    """A mismatch and a wrong value are reported in the definition's words (C, output, samples[i])."""
    split, definition = _edited_solution(
        tmp_path,
        "gemm_n4096_k4096_torch_row",
        "        C[i : i + 1] = (A[i : i + 1].float() @ weight).to(C.dtype)",
        "        row = A[i : i + 1].float()\n"
        "        if A.shape[0] < 8:  # split K for small batches\n"
        "            C[i : i + 1] = row[:, :2048] @ weight[:2048] + row[:, 2048:] @ weight[2048:]\n"
        "        else:\n"
        "            C[i : i + 1] = (row @ weight).to(C.dtype)",
    )
    r = _judge(split, definition, tmp_path / "gemm", static=False, correctness=False)
    assert r.verdict == "bi_violation" and r.mismatch is not None and r.mismatch.output == "C"
    assert ": C[" in r.mismatch.line()

    unweighted, definition = _edited_solution(
        tmp_path, "rmsnorm_h4096_torch_row", "(x * inv_rms * w)", "(x * inv_rms)"
    )
    r = _judge(unweighted, definition, tmp_path / "norm", static=False, dynamic=False)
    correctness = r.stage("correctness")
    assert r.verdict == "incorrect" and correctness is not None
    assert ": output[" in correctness.detail and "reference" in correctness.detail

    greedy_only, definition = _edited_solution(
        tmp_path,
        "top_k_sampling_from_probs_v128256_torch_row",
        "samples[i] = torch.multinomial(row / row.sum(), 1)[0]",
        "samples[i] = row.argmin()",
    )
    r = _judge(greedy_only, definition, tmp_path / "sampling", static=False, dynamic=False)
    correctness = r.stage("correctness")
    assert r.verdict == "incorrect" and correctness is not None
    assert correctness.detail.startswith("probs[") and "samples[" in correctness.detail
    assert "temperature=" not in correctness.detail


def test_crash_on_cpu_says_the_definition_runs_in_float32(tmp_path: Path) -> None:
    """A solution that asserts the definition's bf16 inputs crashes on CPU (fed fp32): its line says why."""
    strict, definition = _edited_solution(
        tmp_path,
        "rmsnorm_h4096_torch_row",
        "    w = weight.float()",
        "    assert hidden_states.dtype == torch.bfloat16\n    w = weight.float()",
    )
    r = _judge(strict, definition, tmp_path / "src", static=False)
    assert r.verdict == "error" and r.error is not None
    assert r.error.startswith("kernel crashed: AssertionError at main.py:")
    assert r.error.endswith(
        "on CPU nodice runs definitions in float32 (Triton's interpreter does not compute bfloat16; "
        "rmsnorm_h4096 declares bfloat16); run with --device cuda to judge in bfloat16"
    )


def test_sizes_of_the_real_moe_definitions_are_pinned() -> None:
    """The published MoE definitions map at their own sizes (judge them on a GPU: Qwen3-30B-A3B's
    fp32 expert weights alone are 2.4 GB); their CPU-sized copies differ in the constants only."""
    for name in [n for n, (task, _) in PUBLISHED.items() if task == "moe"]:
        task = get_task(definition_task_name(FIB / f"{name}.json"))
        assert task.pinned == {"E": 128, "H": 2048, "I": 768, "top_k": 8}  # type: ignore[attr-defined]
        small = name.replace("topk8_e128_h2048_i768", "topk2_e8_h256_i128")
        real, cpu = _definition(name), _definition(small)
        assert list(real.inputs) == list(cpu.inputs) and real.op_type == cpu.op_type == "moe"
        assert math.prod(cpu.const_axes.values()) < math.prod(real.const_axes.values())
