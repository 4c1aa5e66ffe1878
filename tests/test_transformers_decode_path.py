"""nodice's decode steps through transformers' decode fast path (a block table per request, the
key lengths on the device, nothing read on the host: what a CUDA graph can capture), with the
inputs transformers pads once a path is graphed, and the scheduler keeping prompt tokens off it.

CPU, Triton's interpreter, fp32; a real tiny Llama and real continuous batching. transformers
graphs and pads only where CUDA is; here its padding is switched on as it is there
(``ModelRunner.pad_inputs``), the captures themselves run on a GPU (``nodice bench e2e``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

import nodice.integrations.transformers as nt
from nodice.integrations.transformers import batches, e2e
from nodice.integrations.transformers.enable import continuous_batching_config
from nodice.integrations.transformers.registry import fast_decode
from nodice.integrations.transformers.workload import Request, Schedule, build_model, preset, requests

TINY = preset("tiny", layers=1)


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[Any, nt.Integration]]:
    model = build_model(TINY.shape, "float32", "cpu", seed=5)
    integ = nt.enable(model, verify=False, cache=False)
    yield model, integ
    integ.suspend()


@pytest.fixture(scope="module")
def alone_unpadded(tiny: tuple[Any, nt.Integration]) -> dict[bool, dict[str, Any]]:
    """Each request of the padded-steps test alone, greedy and sampled, on unpadded inputs: the
    bits a padded batch must reproduce (computed once for both padding settings)."""
    model, integ = tiny
    reqs = requests(TINY.mix, 3, TINY.shape.vocab, seed=7, shared_prompt=False)
    alone: dict[bool, dict[str, Any]] = {False: {}, True: {}}
    for do_sample in (False, True):
        for r in reqs:
            alone[do_sample].update(_run(model, integ, [r], TINY.schedules[0], do_sample=do_sample)[0])
    return alone


def _run(model: Any, integ: nt.Integration, reqs: list[Request], schedule: Schedule, **kw: Any) -> Any:
    integ.resume()  # this module's kernels, whatever another test enabled since
    integ.kernels.stats.clear()
    out, _ = e2e.generate(model, reqs, TINY, schedule, record=integ.record, nodice=True, **kw)
    assert all(not o.error for o in out.values()), out
    return out, {k: v.routed for k, v in integ.kernels.stats.items()}


def _padded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pad every step's inputs as transformers does when a path runs as a CUDA graph."""
    from transformers.generation.continuous_batching import model_runner

    original = model_runner.ModelRunner.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.pad_inputs = True

    monkeypatch.setattr(model_runner.ModelRunner, "__init__", init)


def test_the_config_graphs_decode_steps_only_and_keeps_the_fast_path_for_nodice() -> None:
    cb = continuous_batching_config(cuda_graphs=True)
    assert cb.use_cuda_graph == (False, True) and cb.use_async_batching is False
    assert (cb.q_padding_interval_size, cb.kv_padding_interval_size) == (1, 1)
    assert continuous_batching_config(cuda_graphs=False).use_cuda_graph is False

    from transformers import LlamaConfig
    from transformers.generation.continuous_batching.initialization import resolve_continuous_batching_config

    nt.registry.register()
    config = LlamaConfig(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=4)
    config._attn_implementation = "paged|nodice"
    cb.max_blocks_per_request = 8
    assert fast_decode(config, cb)
    for impl, scheduler, blocks in (("paged|sdpa", "nodice", 8), ("paged|nodice", "nodice", 0)):
        config._attn_implementation = impl
        other = continuous_batching_config(scheduler_type=scheduler, max_blocks_per_request=blocks)
        assert not fast_decode(config, other)
    # transformers' own resolution: the fast path is kept for paged|nodice, turned off for sdpa.
    for impl, kept in (("paged|nodice", True), ("paged|sdpa", False)):
        config._attn_implementation = impl
        resolved = resolve_continuous_batching_config(config, continuous_batching_config(), None, True)
        assert ((resolved.max_blocks_per_request or 0) > 0) is kept, impl


@pytest.mark.parametrize("intervals", [(1, 1), (0, 0)], ids=["nodice-intervals", "transformers-intervals"])
def test_padded_steps_give_every_request_its_bits_alone(
    tiny: tuple[Any, nt.Integration],
    alone_unpadded: dict[bool, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    intervals: tuple[int, int],
) -> None:
    # Padded inputs: empty sequences after the scheduled ones (and, with transformers' own
    # intervals, padding tokens after the real ones and a read index padded with the trash slot);
    # decode steps padded to a power of two, the padding requests of length 0. Each request alone
    # ran on unpadded inputs.
    model, integ = tiny
    reqs = requests(TINY.mix, 3, TINY.shape.vocab, seed=7, shared_prompt=False)
    wide = TINY.schedules[0]
    _padded(monkeypatch)
    q_pad, kv_pad = intervals
    if q_pad:  # nodice's own setting on CUDA; 0: transformers' defaults (64 query, 16384 key tokens)

        def config(**kw: Any) -> Any:
            pads = {"q_padding_interval_size": q_pad, "kv_padding_interval_size": kv_pad}
            return continuous_batching_config(**{**kw, **pads})

        monkeypatch.setattr(e2e, "continuous_batching_config", config)
    for do_sample in (False, True):
        alone = alone_unpadded[do_sample]
        batched, routed = _run(model, integ, reqs, wide, do_sample=do_sample)
        assert routed.get("decode_table", 0) > 0 and routed.get("prefill", 0) > 0
        if do_sample:
            assert routed.get("sampling", 0) > 0
        c = e2e.compare(alone, batched)
        assert (c.token_mismatches, c.logit_mismatches, c.errors) == (0, 0, 0), c
        assert c.tokens == sum(r.max_new_tokens for r in reqs) == c.draws


def test_a_prompts_one_token_chunk_runs_as_varlen_not_down_the_decode_path(
    tiny: tuple[Any, nt.Integration], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Alone with a budget of 19 tokens, a 20-token prompt ends with a one-token chunk: a step of
    # one-token queries that transformers would send down its decode fast path. The prompt token
    # must take attention_varlen, as it does when the whole prompt is one chunk.
    model, integ = tiny
    gen = torch.Generator().manual_seed(11)
    prompt = tuple(int(t) for t in torch.randint(1, TINY.shape.vocab, (20,), generator=gen))
    req = Request("chunked", prompt, 3)
    whole, _ = _run(model, integ, [req], Schedule("wide", "given", 256, 8))
    chunked, routed = _run(model, integ, [req], Schedule("budget-19", "given", 19, 8))
    assert e2e.compare(whole, chunked).logit_mismatches == 0
    # The decode path took the two generated tokens after the first (one step each), not the chunk.
    assert routed["decode_table"] == 2 * TINY.shape.layers
    # Negative control: left on the fast path, the chunk runs through the decode kernel.
    monkeypatch.setattr(batches, "_as_varlen", lambda scheduler, result: result)
    _, routed = _run(model, integ, [req], Schedule("budget-19", "given", 19, 8))
    assert routed["decode_table"] == 3 * TINY.shape.layers


def test_nodice_eager_is_a_tax_reference_without_graphs(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from nodice.cli import app

    schedule = TINY.schedules[0]
    assert e2e.graph_setting("nodice") is None and e2e.graph_setting(e2e.EAGER) is False
    assert e2e.graph_setting("paged|sdpa+cuda-graphs") is True and e2e.graph_setting("paged|sdpa") is None
    ours = {"record": False, "nodice": True}
    assert e2e._config(TINY, schedule, **ours, cuda_graphs=True).use_cuda_graph == (False, True)
    assert e2e._config(TINY, schedule, **ours, cuda_graphs=False).use_cuda_graph is False
    out = tmp_path / "e2e.json"
    args = ["bench", "e2e", "--preset", "tiny", "--layers", "1", "--phase", "invariance", "--phase", "tax"]
    args += ["-b", "nodice-eager", "-c", "1", "--requests", "1", "--no-sample", "--no-verify"]
    args += ["--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "invariance, nodice-eager: not measured (a speed reference; nodice is measured)" in result.output
    report = json.loads(out.read_text())
    assert report["invariance"] == {}
    for mix in report["tax"].values():
        row = mix["1"]["nodice-eager"]
        assert row["complete"] and row["errors"] == 0 and row["cuda_graphs"] == [False, False]
        assert 0 < row["decode_fast_path_steps"] < row["steps"]  # the prompts' steps are mixed


def test_a_decode_kernel_refusal_gives_decode_steps_the_mixed_steps_arithmetic(
    tiny: tuple[Any, nt.Integration], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The decode kernel validated for another dtype only: a decode-only step's tokens go through
    # the packed path, as a generated token of a mixed step does (attention_varlen), so a request
    # stays bitwise itself whichever kind of step it decodes in.
    from dataclasses import replace

    model, integ = tiny
    decode = integ.kernels.kernels["attention_decode"]
    monkeypatch.setitem(integ.kernels.kernels, "attention_decode", replace(decode, dtypes=("float16",)))
    reqs = requests(TINY.mix, 3, TINY.shape.vocab, seed=13, shared_prompt=False)
    wide = TINY.schedules[0]
    alone = {}
    for r in reqs:
        alone.update(_run(model, integ, [r], wide)[0])
    batched, routed = _run(model, integ, reqs, wide)
    stats = integ.stats()
    assert stats["decode_table"].fallbacks > 0 and stats["decode"].fallbacks > 0
    why = "float32 (attention_decode validated by the gate here: float16)"
    assert why in stats["decode_table"].last_fallback
    assert routed.get("decode_table", 0) == 0 and routed["prefill"] > 0
    c = e2e.compare(alone, batched)
    assert (c.token_mismatches, c.logit_mismatches, c.errors) == (0, 0, 0), c
