"""Batch-invariant mode: torch ops through nodice's gated kernels, and fallbacks that are torch's own.

On CPU the routes run the Triton kernels under the interpreter in fp32 (the
conftest sets ``TRITON_INTERPRET=1`` before Triton is imported), on tiny
shapes. The gate runs for real on the gemm and rmsnorm kernels (once, in a
module fixture; later enables reuse the process's verdicts); the attention
tests opt out of the gate's time with ``verify=False``, the gate on that task
being covered by its own tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from nodice.errors import DeviceError
from nodice.kernels import (
    bundled_kernel,
    disable_batch_invariant_mode,
    enable_batch_invariant_mode,
    is_batch_invariant_mode_enabled,
)
from nodice.kernels.mode import BatchInvariantMode, ModeError
from nodice.kernels.verdicts import forget_verdicts, gate_verdict
from tests.conftest import EXAMPLES

SPLIT_K_FROM_M = EXAMPLES / "gemm" / "split_k_from_m.py"
GATED_OPS = ("mm", "addmm", "bmm", "rms_norm")


@pytest.fixture(autouse=True)
def _mode_off_afterwards() -> Iterator[None]:
    yield
    disable_batch_invariant_mode()


@pytest.fixture(scope="module")
def verdict_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verdicts") / "gate-verdicts.json"


@pytest.fixture(scope="module")
def gated(verdict_file: Path) -> BatchInvariantMode:
    """The whole gate on the gemm and rmsnorm kernels, once; the handle is returned disabled."""
    forget_verdicts()
    with enable_batch_invariant_mode("cpu", ops=GATED_OPS, cache=verdict_file) as mode:
        pass
    return mode


def _enable(verdict_file: Path, **kw: Any) -> BatchInvariantMode:
    return enable_batch_invariant_mode("cpu", ops=kw.pop("ops", GATED_OPS), cache=verdict_file, **kw)


def _attention(verify: bool = False) -> BatchInvariantMode:
    return enable_batch_invariant_mode(
        "cpu", ops=("scaled_dot_product_attention",), verify=verify, cache=False
    )


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def test_the_gate_passes_the_bundled_kernels_and_their_ops_are_routed(gated: BatchInvariantMode) -> None:
    report = gated.report
    assert report.device == "cpu"
    assert set(report.routed) == {f"aten::{op}" for op in (*GATED_OPS, "linear")}
    assert {v.task: (v.verdict, v.source, v.dtypes) for v in report.verdicts} == {
        "gemm": ("pass", "gate", ("float32", "float16")),
        "rmsnorm": ("pass", "gate", ("float32", "float16")),
    }
    assert report.status("mm").kernel == str(bundled_kernel("gemm"))
    assert report.status("linear").routed and "aten::addmm" in report.status("linear").reason
    json.dumps(report.to_dict())


def test_covered_calls_run_nodice_kernels_within_tolerance(
    gated: BatchInvariantMode, verdict_file: Path
) -> None:
    g = _gen()
    a, b, bias = (
        torch.randn(5, 64, generator=g),
        torch.randn(64, 48, generator=g),
        torch.randn(48, generator=g),
    )
    w = torch.randn(48, 64, generator=g)
    x3 = torch.randn(2, 3, 64, generator=g)
    a3, b3 = torch.randn(3, 5, 64, generator=g), torch.randn(3, 64, 48, generator=g)
    h, hw = torch.randn(2, 7, 32, generator=g), torch.randn(32, generator=g)
    calls = {
        "mm": lambda: torch.mm(a, b.t().contiguous().t()),
        "addmm": lambda: torch.addmm(bias, a, b, beta=0.5, alpha=2.0),
        "linear_bias": lambda: F.linear(a, w, bias),
        "linear_3d": lambda: F.linear(x3, w),
        "matmul": lambda: x3 @ b,
        "bmm": lambda: torch.bmm(a3, b3),
        "rms_norm": lambda: F.rms_norm(h, (32,), hw, 1e-6),
        "rms_norm_no_weight": lambda: F.rms_norm(h, (7, 32)),
    }
    expected = {name: fn() for name, fn in calls.items()}
    with _enable(verdict_file) as mode:
        got = {name: fn() for name, fn in calls.items()}
        stats = mode.stats()
    for name, value in got.items():
        torch.testing.assert_close(value, expected[name], rtol=1e-5, atol=1e-4, msg=name)
    assert {op: (s.routed, s.fallbacks) for op, s in stats.items()} == {
        "aten::mm": (3, 0),  # mm, linear on a 3-D input, matmul
        "aten::addmm": (2, 0),  # addmm, linear with a bias
        "aten::bmm": (1, 0),
        "aten::rms_norm": (2, 0),
    }


def test_covered_attention_runs_the_nodice_kernel() -> None:
    g = _gen()
    q = torch.randn(2, 4, 20, 16, generator=g)
    k, v = torch.randn(2, 2, 20, 16, generator=g), torch.randn(2, 2, 20, 16, generator=g)
    calls = {
        "gqa_causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        "mha_scaled": lambda: F.scaled_dot_product_attention(q, q, q, scale=0.3),
    }
    expected = {name: fn() for name, fn in calls.items()}
    with _attention() as mode:
        got = {name: fn() for name, fn in calls.items()}
        stats = mode.stats()["aten::scaled_dot_product_attention"]
    for name, value in got.items():
        torch.testing.assert_close(value, expected[name], rtol=1e-5, atol=1e-5, msg=name)
    assert (stats.routed, stats.fallbacks) == (2, 0)
    assert mode.report.status("scaled_dot_product_attention").reason == "not verified (verify=False)"


def test_routed_ops_are_batch_invariant(gated: BatchInvariantMode, verdict_file: Path) -> None:
    g = _gen()
    a, b = torch.randn(70, 64, generator=g), torch.randn(64, 48, generator=g)
    x, w = torch.randn(9, 32, generator=g), torch.randn(32, generator=g)
    with _enable(verdict_file):
        assert torch.equal(torch.mm(a[:1], b), torch.mm(a, b)[:1])
        assert torch.equal(torch.mm(a[33:34], b), torch.mm(a, b)[33:34])
        assert torch.equal(F.rms_norm(x[4:5], (32,), w), F.rms_norm(x, (32,), w)[4:5])
    q = torch.randn(3, 2, 20, 16, generator=g)
    with _attention():
        alone = F.scaled_dot_product_attention(q[1:2], q[1:2], q[1:2], is_causal=True)
        assert torch.equal(alone, F.scaled_dot_product_attention(q, q, q, is_causal=True)[1:2])


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
def test_uncovered_calls_fall_back_to_exactly_torch(gated: BatchInvariantMode, verdict_file: Path) -> None:
    g = _gen()
    a, b = torch.randn(5, 64, generator=g, dtype=torch.float64), torch.randn(64, 48, generator=g)
    ints = torch.randint(-3, 3, (4, 6), generator=g)
    x = torch.randn(3, 32, generator=g, dtype=torch.float64)
    calls = {
        "mm fp64": ("mm", lambda: torch.mm(a, a.t())),
        "mm int64": ("mm", lambda: torch.mm(ints, ints.t())),
        "mm empty": ("mm", lambda: torch.mm(b[:, :0].t(), b)),
        "addmm fp64": ("addmm", lambda: torch.addmm(a[0, :5], a, a.t())),
        "bmm fp64": ("bmm", lambda: torch.bmm(a[None], a.t()[None])),
        "rms_norm fp64": ("rms_norm", lambda: F.rms_norm(x, (32,))),
        "rms_norm mixed dtypes": ("rms_norm", lambda: F.rms_norm(x.float(), (32,), x[0])),
    }
    expected = {name: fn() for name, (_, fn) in calls.items()}
    with _enable(verdict_file) as mode:
        got = {name: fn() for name, (_, fn) in calls.items()}
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            torch.mm(b, b)
        stats = mode.stats()
    for name, value in got.items():
        assert torch.equal(value, expected[name]), name
    assert all(s.routed == 0 for s in stats.values())
    assert {op: s.fallbacks for op, s in stats.items()} == {
        "aten::mm": 4,
        "aten::addmm": 1,
        "aten::bmm": 1,
        "aten::rms_norm": 2,
    }
    assert "float64" in stats["aten::bmm"].last_fallback


def test_a_call_that_needs_a_gradient_keeps_torchs_autograd(
    gated: BatchInvariantMode, verdict_file: Path
) -> None:
    g = _gen()
    x = torch.randn(4, 32, generator=g, requires_grad=True)
    a, b = torch.randn(3, 32, generator=g), torch.randn(32, 8, generator=g, requires_grad=True)
    with _enable(verdict_file) as mode:
        y = F.rms_norm(x, (32,))
        y.square().sum().backward()
        # mm's derivative sits above the backend key: the product is routed, its gradient too.
        torch.mm(a, b).sum().backward()
        stats = mode.stats()
    assert stats["aten::rms_norm"].fallbacks == 1 and "requires grad" in stats["aten::rms_norm"].last_fallback
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert stats["aten::mm"].routed == 2  # forward and a's transpose times the output gradient
    torch.testing.assert_close(b.grad, a.sum(0)[:, None].expand(32, 8))


def test_uncovered_attention_falls_back_to_exactly_torch() -> None:
    g = _gen()
    q = torch.randn(1, 2, 12, 16, generator=g)
    kv = torch.randn(1, 2, 9, 16, generator=g)
    odd = torch.randn(1, 2, 12, 24, generator=g)
    mask = torch.rand(12, 12, generator=g) > 0.3
    mask.fill_diagonal_(True)
    calls = {
        "attn_mask": lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=mask),
        "fewer keys": lambda: F.scaled_dot_product_attention(q, kv, kv),
        "head dim 24": lambda: F.scaled_dot_product_attention(odd, odd, odd),
        "fp64": lambda: F.scaled_dot_product_attention(q.double(), q.double(), q.double(), is_causal=True),
    }
    expected = {name: fn() for name, fn in calls.items()}
    with _attention() as mode:
        got = {name: fn() for name, fn in calls.items()}
        stats = mode.stats()["aten::scaled_dot_product_attention"]
    for name, value in got.items():
        assert torch.equal(value, expected[name]), name
    assert (stats.routed, stats.fallbacks) == (0, len(calls))


def test_three_d_attention_falls_back_to_the_composite_whose_bmm_is_routed(
    gated: BatchInvariantMode, verdict_file: Path
) -> None:
    """SDPA falls back to torch's composite; on CPU that is math for 3-D inputs, whose bmm is routed."""
    q = torch.randn(2, 12, 16, generator=_gen())
    expected = F.scaled_dot_product_attention(q, q, q)
    ops = ("bmm", "scaled_dot_product_attention")
    with enable_batch_invariant_mode("cpu", ops=ops, verify=False, cache=False) as mode:
        got = F.scaled_dot_product_attention(q, q, q)
        stats = mode.stats()
    sdpa = stats["aten::scaled_dot_product_attention"]
    assert (sdpa.routed, sdpa.fallbacks, sdpa.last_fallback) == (0, 1, "not 4-D [B, H, S, D]")
    assert stats["aten::bmm"].routed == 2
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_the_context_manager_restores_torch_even_after_an_exception(
    gated: BatchInvariantMode, verdict_file: Path
) -> None:
    g = _gen()
    a, b = torch.randn(5, 64, generator=g), torch.randn(64, 48, generator=g)
    x = torch.randn(3, 32, generator=g)
    expected = torch.mm(a, b)
    with pytest.raises(ValueError, match="inside"), _enable(verdict_file) as mode:
        assert is_batch_invariant_mode_enabled() and mode.enabled
        routed = torch.mm(a, b)
        F.rms_norm(x, (32,))
        raise ValueError("inside the mode")
    assert not is_batch_invariant_mode_enabled() and not mode.enabled
    assert not torch.equal(routed, expected)  # the interpreter's kernel sums in another order
    assert torch.equal(torch.mm(a, b), expected)
    F.rms_norm(x, (32,))
    F.rms_norm(x.requires_grad_(), (32,))
    assert (mode.stats()["aten::mm"].routed, mode.stats()["aten::rms_norm"].routed) == (1, 1)
    assert mode.stats()["aten::rms_norm"].fallbacks == 0


def test_enabling_twice_is_idempotent(gated: BatchInvariantMode, verdict_file: Path) -> None:
    a = torch.randn(3, 64, generator=_gen())
    first = _enable(verdict_file)
    second = _enable(verdict_file)
    assert second.report is first.report
    torch.mm(a, a.t())
    assert first.stats()["aten::mm"].routed == second.stats()["aten::mm"].routed == 1
    second.disable()
    second.disable()
    assert is_batch_invariant_mode_enabled() and first.enabled and not second.enabled
    with _enable(verdict_file), _enable(verdict_file):
        pass
    assert first.enabled
    with pytest.raises(ModeError, match="already enabled"):
        _enable(verdict_file, ops=("mm",))
    first.disable()
    assert not is_batch_invariant_mode_enabled()
    _enable(verdict_file)
    _enable(verdict_file)
    disable_batch_invariant_mode()
    assert not is_batch_invariant_mode_enabled()


def test_a_kernel_that_fails_the_gate_is_not_routed(verdict_file: Path) -> None:
    g = _gen()
    a, b = torch.randn(5, 64, generator=g), torch.randn(64, 48, generator=g)
    expected = torch.mm(a, b)
    kernels = {"gemm": SPLIT_K_FROM_M}
    with _enable(verdict_file, ops=("mm", "addmm"), kernels=kernels) as mode:
        got = torch.mm(a, b)
        stats = mode.stats()
    assert torch.equal(got, expected)
    assert stats == {}
    status = mode.report.status("mm")
    assert not status.routed and status.kernel == str(SPLIT_K_FROM_M)
    assert "bi_violation" in status.reason and "num_splits" in status.reason
    assert set(mode.report.not_routed) == {"aten::mm", "aten::addmm", "aten::linear"}
    assert [v.verdict for v in mode.report.verdicts] == ["bi_violation"]


def test_verdicts_persist_with_the_versions_in_their_key(
    gated: BatchInvariantMode, verdict_file: Path
) -> None:
    entries = json.loads(verdict_file.read_text())["entries"]
    gemm = next(k for k, v in entries.items() if v["kernel"] == str(bundled_kernel("gemm")))
    assert (
        "|cpu|" in gemm and "nodice=" in gemm and f"torch={torch.__version__}" in gemm and "triton=" in gemm
    )
    assert entries[gemm]["verdict"] == "pass" and entries[gemm]["dtypes"] == ["float32", "float16"]
    forget_verdicts()
    verdict = gate_verdict("gemm", bundled_kernel("gemm"), torch.device("cpu"), verdict_file)
    assert verdict.source == "disk" and verdict.passed  # read back, not judged again


def test_bad_arguments_are_one_clear_error() -> None:
    with pytest.raises(ModeError, match="unknown op conv2d"):
        enable_batch_invariant_mode("cpu", ops=("conv2d",))
    with pytest.raises(DeviceError):
        enable_batch_invariant_mode("meta")
    assert not is_batch_invariant_mode_enabled()


# ---- on the GPU: batch invariance of a whole block, and the control that shows torch's is not ----


@pytest.fixture(scope="module")
def cuda_gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The whole gate on every routed kernel on this GPU, once; its verdicts stay in the process.

    The CPU tests above leave ``TRITON_INTERPRET=1`` in the environment (the gate sets it for CPU
    runs); kernels imported while it is set would be interpreted, so it is unset here.
    """
    cache = tmp_path_factory.mktemp("cuda-verdicts") / "gate-verdicts.json"
    env = pytest.MonkeyPatch()
    env.delenv("TRITON_INTERPRET", raising=False)
    forget_verdicts()
    with enable_batch_invariant_mode("cuda", cache=cache) as mode:
        pass
    assert set(mode.report.routed) == {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::rms_norm",
        "aten::scaled_dot_product_attention",
        "aten::linear",
    }, mode.report.summary()
    assert {v.task: v.dtypes[0] for v in mode.report.verdicts} == dict.fromkeys(
        ("gemm", "rmsnorm", "attention_prefill"), "bfloat16"
    )
    yield cache
    env.undo()


def _block(hidden: int, vocab: int, device: str) -> Any:
    """Embedding → RMSNorm → GQA attention (SDPA) → MLP (linear) → RMSNorm → logits, random bf16 weights."""
    heads, kv_heads, head_dim, ffn = 32, 8, hidden // 32, 2 * hidden
    g = torch.Generator(device=device).manual_seed(0)

    def weight(*shape: int, scale: float) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device) * scale).to(torch.bfloat16)

    emb = weight(vocab, hidden, scale=1.0)
    wq, wkv = (
        weight(hidden, hidden, scale=hidden**-0.5),
        weight(2 * kv_heads * head_dim, hidden, scale=hidden**-0.5),
    )
    bq = weight(hidden, scale=0.1)
    wo, wg, wu = (weight(hidden, hidden, scale=hidden**-0.5), weight(ffn, hidden, scale=hidden**-0.5),
                  weight(ffn, hidden, scale=hidden**-0.5))  # fmt: skip
    wd, lm = weight(hidden, ffn, scale=ffn**-0.5), weight(vocab, hidden, scale=hidden**-0.5)
    norms = [weight(hidden, scale=0.1) + 1 for _ in range(3)]

    def forward(tokens: torch.Tensor) -> torch.Tensor:
        batch, seq = tokens.shape
        x = emb[tokens]
        h = F.rms_norm(x, (hidden,), norms[0], 1e-6)
        q = F.linear(h, wq, bq).view(batch, seq, heads, head_dim).transpose(1, 2)
        k, v = F.linear(h, wkv).view(batch, seq, 2 * kv_heads, head_dim).transpose(1, 2).chunk(2, dim=1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + F.linear(att.transpose(1, 2).reshape(batch, seq, hidden), wo)
        h = F.rms_norm(x, (hidden,), norms[1], 1e-6)
        x = x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)
        return F.linear(F.rms_norm(x, (hidden,), norms[2], 1e-6), lm)

    return forward


@pytest.mark.gpu
@torch.inference_mode()
def test_a_transformer_block_gives_bitwise_identical_logits_alone_and_in_a_batch(cuda_gated: Path) -> None:
    # Hidden 4096: torch's bf16 GEMM keeps a row's sum order up to 63 rows and changes it from 64, so one
    # 32-token sequence (M=32) and a batch of 8 (M=256) fall on both sides; FA2 splits KV at small batch.
    forward = _block(hidden=4096, vocab=8192, device="cuda")
    tokens = torch.randint(0, 8192, (8, 32), generator=torch.Generator().manual_seed(1)).cuda()
    batch = tokens.clone()
    batch[5] = tokens[0]

    def alone_and_in_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = forward(batch)
        return forward(tokens[:1])[0], out[0], out[5]

    with enable_batch_invariant_mode("cuda", cache=cuda_gated) as mode:
        alone, first, fifth = alone_and_in_batch()
        stats = mode.stats()
    assert torch.equal(alone, first) and torch.equal(alone, fifth)
    assert all(s.fallbacks == 0 for s in stats.values()), stats
    assert all(
        stats[f"aten::{op}"].routed > 0 for op in ("mm", "addmm", "rms_norm", "scaled_dot_product_attention")
    )

    torch_alone, torch_first, torch_fifth = alone_and_in_batch()
    assert not (torch.equal(torch_alone, torch_first) and torch.equal(torch_alone, torch_fifth)), (
        "negative control: torch alone was batch-invariant here"
    )
    # The routed block computes the same function as torch's, to bf16 rounding.
    drift = (alone.float() - torch_alone.float()).norm() / torch_alone.float().norm()
    assert drift < 0.02


@pytest.mark.gpu
@torch.inference_mode()
def test_each_routed_op_is_batch_invariant_on_cuda(cuda_gated: Path) -> None:
    g = torch.Generator(device="cuda").manual_seed(2)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device="cuda").to(torch.bfloat16)

    a, w, bias = randn(512, 4096), randn(4096, 4096), randn(4096)
    x, nw = randn(257, 4096), randn(4096)
    q, kv = randn(8, 32, 256, 128), randn(8, 8, 256, 128)
    with enable_batch_invariant_mode("cuda", cache=cuda_gated) as mode:
        assert torch.equal(torch.mm(a[:1], w), torch.mm(a, w)[:1])
        assert torch.equal(F.linear(a[7:8], w, bias), F.linear(a, w, bias)[7:8])
        assert torch.equal(torch.bmm(a[None, :3], w[None]), torch.bmm(a[None], w[None])[:, :3])
        assert torch.equal(F.rms_norm(x[:1], (4096,), nw, 1e-6), F.rms_norm(x, (4096,), nw, 1e-6)[:1])
        sdpa = F.scaled_dot_product_attention
        alone = sdpa(q[3:4], kv[3:4], kv[3:4], is_causal=True, enable_gqa=True)
        assert torch.equal(alone, sdpa(q, kv, kv, is_causal=True, enable_gqa=True)[3:4])
        before = mode.stats()
        cpu_a, cpu_w = a[:4].float().cpu(), w.float().cpu()
        torch.mm(cpu_a, cpu_w)  # CPU tensors never reach the CUDA routes
        assert mode.stats() == before
        precision = torch.backends.cuda.matmul.fp32_precision
        try:
            torch.backends.cuda.matmul.fp32_precision = "ieee"
            torch.mm(a[:4].float(), w.float())
        finally:
            torch.backends.cuda.matmul.fp32_precision = precision
        after = mode.stats()
    assert all(s.fallbacks == 0 for s in before.values()), before
    # Refused for TF32, or, if the gate's fp32 probe did not run the kernel, as a dtype it did not validate.
    reason = after["aten::mm"].last_fallback
    assert after["aten::mm"].fallbacks == 1 and ("TF32" in reason or "float32 (validated" in reason), reason
