"""nodice inside transformers: real models from configs (random weights), real continuous batching.

On CPU the kernels run under Triton's interpreter in fp32; ``verify=False`` skips the gate's time
(the gate's own tests judge these kernels). The invariance test drives ``nodice bench e2e``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

pytest.importorskip("transformers")

import nodice.integrations.transformers as nt
from nodice.cli import app
from nodice.integrations.transformers.workload import TINY, build_model


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[Any, nt.Integration]]:
    model = build_model(TINY, "float32", "cpu", seed=1)
    integ = nt.enable(model, verify=False, cache=False)
    yield model, integ
    integ.suspend()


def test_bench_e2e_alone_equals_batched_bitwise_under_every_schedule(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "e2e.json", tmp_path / "e2e.md"
    args = [
        "bench",
        "e2e",
        "--preset",
        "tiny",
        "--layers",
        "1",
        "--requests",
        "2",
        "--phase",
        "invariance",
        "-b",
        "nodice",
        "-b",
        "paged|sdpa",
        "--no-verify",
        "--json",
        str(out_json),
        "--markdown",
        str(out_md),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out_json.read_text())
    for section in ("invariance", "sampled"):
        ours = report[section]["nodice"]
        assert len(ours["schedules"]) >= 3 and ours["alone_tokens"] > 0
        for c in ours["schedules"].values():
            assert c["tokens"] == ours["alone_tokens"] and c["draws"] == c["tokens"]
            assert (c["token_mismatches"], c["logit_mismatches"], c["errors"]) == (0, 0, 0)
    # The negative control is counted, never assumed: CPU digits of a library are not asserted.
    for c in report["invariance"]["paged|sdpa"]["schedules"].values():
        assert c["tokens"] > 0 and c["logit_mismatches"] >= 0 and c["errors"] == 0
    stats = report["stats"]
    assert (
        stats["prefill"]["routed"] > 0 and stats["decode"]["routed"] > 0 and stats["paged"]["fallbacks"] == 0
    )
    assert stats["sampling"]["routed"] > 0 and stats["sampling"]["fallbacks"] == 0
    assert "| paged\\|sdpa | reversed-chunked |" in out_md.read_text()


def test_contiguous_attention_is_routed_and_a_padded_batch_falls_back(
    tiny: tuple[Any, nt.Integration],
) -> None:
    model, integ = tiny
    assert model.config._attn_implementation == "nodice"
    assert integ.report.norms == 2 * TINY.layers + 1
    assert {"aten::mm", "aten::addmm", "aten::rms_norm"} <= set(integ.report.mode.routed)
    ids = torch.randint(1, TINY.vocab, (3, 9), generator=torch.Generator().manual_seed(0))
    before = integ.stats().get("attention", nt.CallStats())
    with torch.no_grad():
        alone = model(ids[1:2]).logits
        batched = model(ids).logits
        mask = torch.ones_like(ids)
        mask[0, :3] = 0
        model(ids, attention_mask=mask)
    assert torch.equal(alone[0], batched[1])
    # Linear weights are stored transposed, so the gemm kernel gets F.linear's operand without a copy;
    # the same values in the other layout give the same bits.
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert integ.report.linear_weights == len(linears) > 0
    assert all(m.weight.t().is_contiguous() for m in linears)
    row_major = linears[0].weight.detach().contiguous()
    x = torch.randn(5, row_major.shape[1], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(x @ linears[0].weight.t(), x @ row_major.t())
    after = integ.stats()["attention"]
    assert after.routed - before.routed == 2 * TINY.layers
    assert after.fallbacks - before.fallbacks == TINY.layers
    assert after.last_fallback == "an attention mask (padded batch)"


def test_an_uncovered_dtype_runs_torch_and_says_why(tiny: tuple[Any, nt.Integration]) -> None:
    model, integ = tiny
    ids = torch.randint(1, TINY.vocab, (1, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model.double()(ids).logits
    model.float()
    assert logits.dtype == torch.float64 and torch.isfinite(logits).all()
    assert integ.stats()["attention"].last_fallback.startswith(
        "float64 (attention_varlen validated by the gate"
    )


def test_sliding_window_attention_stays_the_models_own() -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=0,
        attn_implementation="sdpa",
    )
    model = Qwen3ForCausalLM(config).eval()
    integ = nt.enable(model, verify=False, cache=False)
    try:
        assert model.config._attn_implementation == "sdpa"
        assert "sliding-window attention" in integ.report.attention
        assert integ.report.norms == 5  # two per layer, q/k norms, the final norm
    finally:
        integ.suspend()


def test_qwen3_moe_blocks_run_as_the_moe_kernel_and_generation_stays_invariant(tmp_path: Path) -> None:
    # The bench's own path: a Qwen3-MoE config, its sparse blocks through the moe kernel, every
    # request's tokens and logits under continuous batching against the same request alone.
    out_json = tmp_path / "e2e.json"
    args = ["bench", "e2e", "--preset", "tiny", "--model", "qwen3_moe", "--layers", "1", "--requests", "2"]
    args += ["--phase", "invariance", "-b", "nodice", "--no-sample", "--no-verify", "--json", str(out_json)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out_json.read_text())
    ours = report["invariance"]["nodice"]
    assert len(ours["schedules"]) >= 3 and ours["alone_tokens"] > 0
    for c in ours["schedules"].values():
        assert c["tokens"] == ours["alone_tokens"]
        assert (c["token_mismatches"], c["logit_mismatches"], c["errors"]) == (0, 0, 0)
    assert report["stats"]["moe"]["routed"] > 0 and report["stats"]["moe"]["fallbacks"] == 0
    assert report["preset"]["shape"]["experts"] == 8


def _moe_in_fp64(x: torch.Tensor, block: Any) -> torch.Tensor:
    """The sparse block's formula in float64: softmax, top-k renormalised, each expert's SwiGLU."""
    h = x.double().reshape(-1, x.shape[-1])
    probs = torch.softmax(h @ block.gate.weight.double().t(), dim=-1)
    weights, experts = torch.topk(probs, block.gate.top_k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for t in range(h.shape[0]):
        for w, e in zip(weights[t], experts[t], strict=True):
            gate, up = (h[t] @ block.experts.gate_up_proj[e].double().t()).chunk(2)
            out[t] += w * ((torch.nn.functional.silu(gate) * up) @ block.experts.down_proj[e].double().t())
    return out.reshape(x.shape)


def test_a_routed_moe_block_computes_what_the_stock_block_does() -> None:
    from nodice.integrations.transformers.workload import preset

    shape = preset("tiny", family="qwen3_moe", layers=1).shape
    model = build_model(shape, "float32", "cpu", seed=3)
    integ = nt.enable(model, verify=False, cache=False)
    try:
        assert integ.report.moe_blocks == 1 and not integ.report.moe_kept
        block = model.model.layers[0].mlp
        x = torch.randn(2, 7, shape.hidden, generator=torch.Generator().manual_seed(4))
        with torch.no_grad():
            ours = block(x)
            alone = block(x[1:2])
            integ.suspend()  # the stock block and its fp64 twin in torch's own ops
            stock = block._nodice_original_forward(x)
            exact = _moe_in_fp64(x, block)
        assert torch.equal(alone[0], ours[1])
        assert integ.stats()["moe"].routed == 2
        # Both fp32 results against the fp64 one: nodice's error within a few times the stock block's
        # (another summation order, routing weights kept in fp32), plus a few units of the last place.
        u = torch.finfo(torch.float32).eps / 2
        err_ours = (ours.double() - exact).abs().max().item()
        err_stock = (stock.double() - exact).abs().max().item()
        assert err_ours <= 4 * err_stock + 8 * u * exact.abs().max().item()
    finally:
        integ.suspend()


def test_moe_blocks_the_kernel_does_not_cover_stay_the_models_own_and_say_why() -> None:
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    common = dict(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        attn_implementation="sdpa",
    )
    for overrides, why in [
        ({"norm_topk_prob": False}, "norm_topk_prob=False"),
        ({"norm_topk_prob": True, "output_router_logits": True}, "output_router_logits"),
        ({"norm_topk_prob": True, "hidden_act": "gelu"}, "activation"),
    ]:
        model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**common, **overrides)).eval()
        integ = nt.enable(model, verify=False, cache=False)
        try:
            assert integ.report.moe_blocks == 0
            assert len(integ.report.moe_kept) == 1 and why in integ.report.moe_kept[0], integ.report.moe_kept
            assert "kept: model.layers.0.mlp" in integ.report.summary()
        finally:
            integ.suspend()


def test_the_stock_cuda_graph_reference_asks_transformers_for_graphs_and_reports_what_ran() -> None:
    """``paged|sdpa+cuda-graphs`` is paged|sdpa with ``use_cuda_graph`` forced on (transformers leaves
    it off where a mask is needed): a speed reference on a GPU. The report says which paths ran as
    graphs; here, without CUDA, transformers turns them off and the report says so."""
    from nodice.integrations.transformers import e2e
    from nodice.integrations.transformers.workload import preset, requests

    tiny = preset("tiny", layers=1)
    assert "paged|sdpa+cuda-graphs" in e2e.available_backends("cuda")
    assert "paged|sdpa+cuda-graphs" not in e2e.available_backends("cpu")
    assert e2e.attn_implementation("paged|sdpa+cuda-graphs") == "paged|sdpa"
    schedule = tiny.schedules[0]
    assert e2e._config(tiny, schedule, record=False, nodice=False, cuda_graphs=True).use_cuda_graph is True
    assert e2e._config(tiny, schedule, record=False, nodice=False).use_cuda_graph is None  # the heuristic
    model = build_model(tiny.shape, "float32", "cpu", seed=3)
    model.set_attn_implementation(e2e.attn_implementation("paged|sdpa+cuda-graphs"))
    reqs = requests(tiny.tax_mixes[-1], 2, tiny.shape.vocab, seed=3, shared_prompt=False)
    row = e2e.throughput(model, reqs, tiny, 2, nodice=False, cuda_graphs=True)
    assert row["complete"] and row["errors"] == 0
    assert row["tokens"] == sum(r.max_new_tokens for r in reqs)
    assert row["cuda_graphs"] == [False, False]


def test_requests_alone_are_shared_by_shard_kept_across_runs_and_only_the_missing_ones_run(
    tmp_path: Path,
) -> None:
    # On a GPU the requests alone (one per forward pass) are launch-bound: N processes each run a
    # share, then one run reads every shard and runs only the schedules. A long invariance run over
    # several time-limited calls: a later run reads what the earlier ones ran alone, runs only the
    # request whose outcome was lost, and compares the same way.
    alone_dir = tmp_path / "alone"
    args = ["bench", "e2e", "--preset", "tiny", "--layers", "1", "--requests", "3", "--phase", "invariance"]
    args += ["-b", "nodice", "--no-sample", "--no-verify", "--alone-dir", str(alone_dir)]
    for i in (0, 1):
        part = CliRunner().invoke(
            app, [*args, "--alone-shard", f"{i}/2", "--json", str(tmp_path / f"s{i}.json")]
        )
        assert part.exit_code == 0, part.output
        assert f"shard {i} of 2: {2 - i} requests run" in part.output and "given-wide" not in part.output
        report = json.loads((tmp_path / f"s{i}.json").read_text())
        assert report["alone_shards"]["nodice"]["alone_run"] == 2 - i and report["invariance"] == {}
    shards = sorted(p.name for p in alone_dir.iterdir())
    assert shards == ["alone-nodice.shard-0-of-2.json", "alone-nodice.shard-1-of-2.json"]
    whole = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "all.json")])
    assert whole.exit_code == 0, whole.output
    assert "3 of 3 requests read from" in whole.output and "0 to run" in whole.output
    first = json.loads((tmp_path / "all.json").read_text())["invariance"]["nodice"]
    schedules = first["schedules"]
    assert len(schedules) >= 3
    assert all(c["token_mismatches"] == c["logit_mismatches"] == c["errors"] == 0 for c in schedules.values())

    # One outcome lost from every file: the next run reads the other two and runs that one alone.
    stored = json.loads((alone_dir / "alone-nodice.shard-0-of-2.json").read_text())
    assert len(stored["outcomes"]) == 2 and stored["key"]["backend"] == "nodice"
    lost = sorted(stored["outcomes"])[0]
    for f in alone_dir.iterdir():
        data = json.loads(f.read_text())
        data["outcomes"].pop(lost, None)
        f.write_text(json.dumps(data))
    again = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "again.json")])
    assert again.exit_code == 0, again.output
    assert "2 of 3 requests read from" in again.output and "1 to run" in again.output
    assert json.loads((tmp_path / "again.json").read_text())["invariance"]["nodice"] == first
    from nodice.integrations.transformers.e2e import AloneStore

    whole_file = alone_dir / "alone-nodice.json"
    assert json.loads(whole_file.read_text())["outcomes"][lost] == stored["outcomes"][lost]  # the same bits
    assert len(AloneStore(whole_file, stored["key"]).outcomes) == 3
    # Other settings (another seed: other requests) never read those files.
    assert AloneStore(whole_file, {**stored["key"], "seed": 1}).outcomes == {}
    # A damaged store is a cache lost, never a traceback: what is not an outcome is run again.
    good = json.loads(whole_file.read_text())
    bent = {**good, "outcomes": {**good["outcomes"], lost: {"tokens": "x", "logits": [1]}}}
    for damaged, kept in (([1, 2], 0), ({"key": good["key"], "outcomes": [1]}, 0), (bent, 2)):
        (tmp_path / "damaged.json").write_text(json.dumps(damaged))
        assert len(AloneStore(tmp_path / "damaged.json", good["key"]).outcomes) == kept
    # A file where the folder should be is one line and exit 2, before any model is built.
    bad = CliRunner().invoke(app, [*args[:-1], str(whole_file)])
    assert bad.exit_code == 2 and "not a folder" in bad.output
    for bad, why in (("2/2", "expected I/N"), ("0/2 --phase tax", "--phase invariance alone")):
        extra = bad.split()
        out = CliRunner().invoke(app, [*args, "--alone-shard", *extra])
        assert out.exit_code == 2 and why in out.output, out.output
