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
        "3",
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
