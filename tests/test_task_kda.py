"""The kda task: the per-channel recurrence, Kimi-Linear inputs, chunk-boundary contexts, the gate (CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nodice.gate.pipeline import check
from nodice.tasks import _scratch, get_task
from nodice.tasks.base import Workload
from nodice.tasks.gdn import gated_delta_rule, recurrence_blocks
from tests.conftest import EXAMPLES

KDA = EXAMPLES / "kda"
VARIANTS = [
    "chunk_size_from_tokens",
    "packed_stream_chunks",
    "recurrent_path_small_batch",
    "split_t_from_batch",
]
CPU = torch.device("cpu")


def assert_close(got: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    # torch.allclose, not torch.testing: the latter imports torch.distributed on first use (seconds).
    assert torch.allclose(got, expected, atol=atol, rtol=rtol), (got - expected).abs().max()


def _batch(batch: int, length: int, seed: int = 0) -> tuple[object, ...]:
    task = get_task("kda")
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, T=length)
    return task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen)


def test_reference_in_blocks_matches_a_per_channel_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    batch, length, heads, dk, dv = 3, 20, 2, 32, 32
    # Two of three sequences and seven of 20 tokens a block: neither divides its axis.
    budget = 2 * 3 * heads * dk * dv * 4 + 2 * 7 * heads * (2 * dk + 3 * dv + 1 + dk) * 4
    assert recurrence_blocks(batch, length, heads, dk, dv, budget, decay_channels=dk) == (2, 7)
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", budget)
    task = get_task("kda")
    shape = Workload("blocks", {"B": batch, "T": length, "Hh": heads, "Dk": dk, "Dv": dv})
    q, k, v, g, beta, scale = task.workload_inputs(
        shape, torch.Generator().manual_seed(0), CPU, torch.float32
    )
    expected = torch.empty_like(v)
    for b in range(batch):
        for h in range(heads):
            state = torch.zeros(dk, dv)
            for t in range(length):
                state = torch.diag(torch.exp(g[b, t, h])) @ state
                u = beta[b, t, h] * (v[b, t, h] - k[b, t, h] @ state)
                state = state + torch.outer(k[b, t, h], u)
                expected[b, t, h] = scale * (q[b, t, h] @ state)
    assert_close(task.reference(q, k, v, g, beta, scale), expected)


def test_a_gate_equal_across_channels_is_gdn() -> None:
    q, k, v, g, beta, scale = _batch(2, 12)
    per_head = g[..., 0]
    same = per_head[..., None].expand_as(g).contiguous()
    assert_close(
        gated_delta_rule(q, k, v, same, beta, scale), gated_delta_rule(q, k, v, per_head, beta, scale)
    )
    # The drawn gates do differ across channels, and that changes the output.
    assert not torch.allclose(
        gated_delta_rule(q, k, v, g, beta, scale), gated_delta_rule(q, k, v, same, beta, scale)
    )


def test_inputs_have_kimi_linear_ranges() -> None:
    q, k, _, g, beta, scale = _batch(3, 16)
    assert_close(k.norm(dim=-1), torch.ones(k.shape[:-1]))
    assert_close(q.norm(dim=-1), torch.ones(q.shape[:-1]))
    assert g.shape == q.shape and g.dtype == beta.dtype == torch.float32
    assert bool((g < 0).all()) and float(g.min()) > -60.0
    # A per-channel gate: channels of one token decay at different rates.
    assert float(g.std(dim=-1).min()) > 0
    assert bool(((beta > 0) & (beta < 1)).all())
    assert scale == pytest.approx(q.shape[-1] ** -0.5)


def test_contexts_put_lengths_on_both_sides_of_chunk_boundaries() -> None:
    task = get_task("kda")
    for device in (CPU, torch.device("cuda")):
        lengths = {c.params["variant"]["T"] for c in task.contexts(device)}
        chunked = 16 if device.type == "cpu" else 64
        # On a chunk multiple, one token past one, and between multiples of 8.
        assert chunked in lengths and any(t % chunked == 1 for t in lengths) and any(t % 8 for t in lengths)
        # A sequence of several chunks in a batch of more than one wave of lanes (a T split moves).
        assert any(
            c.params["variant"]["T"] > 2 * chunked and c.batch_size > 66 for c in task.contexts(device)
        )
    problem = task.problem(torch.Generator().manual_seed(0), CPU, torch.float32, T=33)
    assert problem.dims["T"] == 33


def test_workloads_are_kimi_linear_shapes() -> None:
    task = get_task("kda")
    workloads = task.workloads()
    assert all(w.params["Hh"] == 32 and w.params["Dk"] == w.params["Dv"] == 128 for w in workloads)
    tokens = {w.params["B"] * w.params["T"] for w in workloads}
    assert max(tokens) == 32768 and min(tokens) <= 4096
    assert any(w.params["B"] > 1 and w.params["B"] * w.params["T"] >= 16384 for w in workloads)
    assert any(w.params["T"] <= 16 for w in workloads)
    p = max(workloads, key=lambda w: w.params["T"]).params
    assert task.flops(Workload("x", p)) == 7.0 * p["B"] * p["T"] * 32 * 128 * 128
    assert "Kimi-Linear" in workloads[0].model and "g[B,T,Hh,Dk]" in task.signature


def test_seed_passes_the_gate() -> None:
    r = check(KDA / "seed.py", "kda", device="cpu", seed=0)
    assert r.verdict == "pass", r.reason
    dynamic = r.stage("dynamic")
    assert dynamic is not None and dynamic.stats["contexts"] > len(get_task("kda").contexts(CPU))


@pytest.mark.parametrize("variant", VARIANTS)
def test_violating_variant_is_caught_dynamically(variant: str) -> None:
    r = check(KDA / f"{variant}.py", "kda", device="cpu", seed=0, static=False, correctness=False)
    assert r.verdict == "bi_violation", r.reason
    assert r.mismatch is not None and r.mismatch.differing > 0


def _mutant(tmp_path: Path, old: str, new: str) -> Path:
    source = (KDA / "seed.py").read_text()
    assert old in source
    cand = tmp_path / "mutant.py"
    cand.write_text(source.replace(old, new))
    return cand


def test_a_per_head_gate_is_caught_by_correctness(tmp_path: Path) -> None:
    # Every channel decays with channel 0's gate, as a gated DeltaNet kernel would.
    load = "g = tl.load(g_ptr + qk_offs, mask=qk_mask, other=0.0)"
    first_channel = "g = tl.load(g_ptr + qk_offs - dks[None, :], mask=qk_mask, other=0.0)"
    r = check(
        _mutant(tmp_path, load, first_channel), "kda", device="cpu", seed=0, static=False, dynamic=False
    )
    assert r.verdict == "incorrect", r.reason


def test_decay_after_the_update_is_caught_by_correctness(tmp_path: Path) -> None:
    decay = "        state = state * tl.exp(summed - chunk_sum)[:, :, None]\n"
    update = "        state = state + k[:, :, None] * u[:, None, :]\n"
    source = (KDA / "seed.py").read_text()
    assert decay in source and update in source
    cand = tmp_path / "late_decay.py"
    cand.write_text(source.replace(decay, "").replace(update, update + decay))
    r = check(cand, "kda", device="cpu", seed=0, static=False, dynamic=False)
    assert r.verdict == "incorrect", r.reason


# The GPU path without a GPU: every example's kernels compile for Hopper (sm_90) at the real head
# dims. In a process of its own: under TRITON_INTERPRET=1 (set for these tests) Triton's own jit
# helpers (tl.sum …) are wrapped for the interpreter and cannot be compiled.
_COMPILE = """
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

ARGS = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "g_ptr": "*fp32", "beta_ptr": "*fp32",
        "o_ptr": "*bf16", "n_lanes": "i32", "seq_len": "i32", "n_heads": "i32", "scale": "fp32"}
HEAD = {"DK": 128, "DV": 128, "LANES": 1, "BLOCK_V": 32}
SEGMENTS = {"start_ptr": "*fp32", "final_ptr": "*fp32", "seg_len": "i32"}
FLAGS = {"CHUNK": 16, "LOAD_START": True, "STORE_OUT": True, "STORE_FINAL": True}
KERNELS = [
    ("seed", "_kda_recurrent", {}, {"CHUNK": 16}),
    ("chunk_size_from_tokens", "_kda_recurrent", {"chunk": "i32"}, {}),
    ("packed_stream_chunks", "_kda_recurrent", {}, {"CHUNK": 16}),
    ("recurrent_path_small_batch", "_kda_fused_recurrent", {}, {}),
    ("recurrent_path_small_batch", "_kda_chunked", {}, {"CHUNK": 16}),
    ("split_t_from_batch", "_kda_segments", SEGMENTS, FLAGS),
]
for example, fn, extra, consts in KERNELS:
    spec = importlib.util.spec_from_file_location(example, f"{sys.argv[1]}/{example}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    constexprs = {**HEAD, **consts}
    signature = {**ARGS, **extra, **{name: "constexpr" for name in constexprs}}
    src = ASTSource(fn=getattr(module, fn), signature=signature, constexprs=constexprs)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    print(example, fn, ".target sm_90" in ptx)
"""


def test_example_kernels_compile_for_hopper(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env |= {"TRITON_CACHE_DIR": str(tmp_path), "TRITON_DEFAULT_FP_FUSION": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE, str(KDA)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.split("\n")
    assert sum(line.endswith(" True") for line in lines) == 6, done.stdout
