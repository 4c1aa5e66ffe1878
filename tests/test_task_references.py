"""References at real sizes: chunked to a scratch budget, equal to the unchunked formulas.

Each reference is run with a budget so small that its work splits into many
pieces (head and query chunks across causal boundaries, sequence and token
blocks, row chunks that do not divide the batch) and compared with the
straightforward formula written out here. The attention planner is checked at
the benchmark's real sizes without allocating anything.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from nodice.tasks import _scratch, get_task
from nodice.tasks._attention import AttentionChunks, attend, chunk_scratch_bytes, plan_attention_chunks
from nodice.tasks.base import Workload
from nodice.tasks.gdn import recurrence_blocks
from nodice.tasks.sampling import filtered_distribution
from tests.fp32_bounds import U, assert_within, attention_bound, matmul_bound, paged_decode_bound

CPU = torch.device("cpu")
META = torch.device("meta")


def assert_close(got: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-6) -> None:
    """Within ``rtol`` of the output's scale: sums that cancel leave small entries a few
    ulps of their terms away, not of themselves."""
    assert got.shape == expected.shape and got.dtype == expected.dtype
    error = float((got - expected).abs().max()) if got.numel() else 0.0
    assert error <= rtol * float(expected.abs().max()), (error, float(expected.abs().max()))


def _args(name: str, batch: int, seed: int = 0, **variant: Any) -> tuple[Any, ...]:
    task = get_task(name)
    gen = torch.Generator().manual_seed(seed)
    problem = task.problem(gen, CPU, torch.float32, **variant)
    return task.compose(problem, task.samples(problem, gen, batch), gen)


def _unchunked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> torch.Tensor:
    group = q.shape[0] // k.shape[0]
    kf, vf = k.float().repeat_interleave(group, dim=0), v.float().repeat_interleave(group, dim=0)
    scores = q.float() @ kf.transpose(-1, -2) * sm_scale
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        rows = torch.arange(sq)[:, None] + (sk - sq)
        scores = scores.masked_fill(torch.arange(sk)[None, :] > rows, float("-inf"))
    return torch.softmax(scores, dim=-1) @ vf


# S = 45 with budgets that give one kv head at a time and 10, 5 or 2 query rows (12 kB),
# or every head and 3, 8 or 10 rows (30 kB): chunk edges cross the causal diagonal.
@pytest.mark.parametrize("budget", [12_000, 30_000])
@pytest.mark.parametrize("layout", ["mha", "gqa", "mqa"])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_prefill_in_chunks_is_the_unchunked_formula(
    monkeypatch: pytest.MonkeyPatch, budget: int, layout: str, causal: bool
) -> None:
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", budget)
    q, k, v, is_causal, scale = _args("attention_prefill", 2, layout=layout, causal=causal, seq_len=45)
    chunks = plan_attention_chunks(q.shape[1], k.shape[1], 45, 45, q.shape[3])
    assert chunks.queries < 45 and (budget > 12_000 or chunks.kv_heads < k.shape[1] or k.shape[1] == 1)
    expected = torch.stack([_unchunked_attention(q[b], k[b], v[b], is_causal, scale) for b in range(2)])
    got = get_task("attention_prefill").reference(q, k, v, is_causal, scale)
    assert_within(got, expected, attention_bound(q, k, v, scale, is_causal), "prefill in chunks")


def test_causal_chunks_with_fewer_queries_than_keys_align_the_last_query_with_the_last_key() -> None:
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(shape, generator=gen) for shape in ((4, 13, 16), (2, 40, 16), (2, 40, 16)))
    got = attend(q, k, v, True, 0.3, budget=6_000)
    assert_within(
        got, _unchunked_attention(q, k, v, True, 0.3), attention_bound(q, k, v, 0.3, True), "causal"
    )


def test_attention_decode_in_chunks_follows_the_block_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", 6_000)
    q, k_cache, v_cache, table, seq_lens, scale = _args("attention_decode", 4, layout="gqa")
    page = k_cache.shape[1]
    expected = []
    for i, n in enumerate(seq_lens.tolist()):
        tokens = torch.arange(n)
        pages, slots = table[i, tokens // page].long(), tokens % page
        k, v = k_cache[pages, slots].transpose(0, 1), v_cache[pages, slots].transpose(0, 1)
        expected.append(_unchunked_attention(q[i].unsqueeze(1), k, v, False, scale).squeeze(1))
    got = get_task("attention_decode").reference(q, k_cache, v_cache, table, seq_lens, scale)
    bound = paged_decode_bound(q, k_cache, v_cache, table, seq_lens, scale)
    assert_within(got, torch.stack(expected), bound, "decode in chunks")


@pytest.mark.parametrize("name", ["attention_prefill", "attention_decode"])
def test_attention_plans_stay_within_the_budget_at_every_workload(name: str) -> None:
    for w in get_task(name).workloads():
        p = w.params
        queries, keys = (p["S"], p["S"]) if "S" in p else (1, p["L"])
        group = p["Hq"] // p["Hkv"]
        chunks = plan_attention_chunks(p["Hq"], p["Hkv"], queries, keys, p["D"])
        assert chunk_scratch_bytes(chunks, group, keys, p["D"]) <= _scratch.SCRATCH_BYTES <= 4 << 30, w.name


@pytest.mark.parametrize(("q_heads", "kv_heads"), [(16, 16), (32, 8), (32, 4)])
def test_a_32k_sequence_of_32_heads_plans_score_chunks_under_the_budget(q_heads: int, kv_heads: int) -> None:
    seq, head_dim, group = 32768, 128, q_heads // kv_heads
    chunks = plan_attention_chunks(q_heads, kv_heads, seq, seq, head_dim)
    scores = chunks.kv_heads * group * chunks.queries * seq * 4
    # The unchunked [Hq, S, S] fp32 scores would be 64 or 128 GiB.
    assert scores <= _scratch.SCRATCH_BYTES < q_heads * seq * seq * 4 // 16
    assert chunk_scratch_bytes(chunks, group, seq, head_dim) <= _scratch.SCRATCH_BYTES
    # Whole heads and a few hundred queries a chunk: ~150 chunks a sequence, not thousands.
    assert chunks.kv_heads == kv_heads and chunks.queries >= 128


def test_the_smallest_attention_chunk_is_one_query_row_of_one_kv_head() -> None:
    assert plan_attention_chunks(32, 8, 32768, 32768, 128, budget=1) == AttentionChunks(1, 1)


class _LargestTensor(TorchFunctionMode):
    """Records the bytes of the largest tensor any torch call returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


@pytest.mark.parametrize("workload", ["gqa32x8-s32k-full", "mha16-s32k-causal"])
def test_the_prefill_reference_at_32k_creates_no_tensor_over_the_budget(workload: str) -> None:
    (w,) = [w for w in get_task("attention_prefill").workloads() if w.name == workload]
    p = w.params
    q = torch.empty((p["B"], p["Hq"], p["S"], p["D"]), device=META, dtype=torch.bfloat16)
    k, v = (torch.empty((p["B"], p["Hkv"], p["S"], p["D"]), device=META, dtype=torch.bfloat16) for _ in "kv")
    with _LargestTensor() as sizes:
        out = get_task("attention_prefill").reference(q, k, v, p["causal"], p["D"] ** -0.5)
    assert out.device == META and out.shape == q.shape and out.dtype == torch.bfloat16
    assert 0 < sizes.largest <= _scratch.SCRATCH_BYTES


def test_row_chunks_cover_the_rows_within_the_budget() -> None:
    assert _scratch.row_chunks(10, 100, budget=300) == [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 10)]
    assert _scratch.row_chunks(5, 10**12, budget=1) == [slice(i, i + 1) for i in range(5)]
    assert _scratch.row_chunks(5, 1) == [slice(0, 5)]


def test_rowwise_references_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", 3 * 16 * 1024)  # three rows of 1024
    x, weight, eps = _args("rmsnorm", 7)
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    assert_close(get_task("rmsnorm").reference(x, weight, eps), x * rstd * weight)
    x, residual, weight, eps = _args("add_rmsnorm", 7)
    r = x + residual
    y, residual_out = get_task("add_rmsnorm").reference(x, residual, weight, eps)
    assert_close(residual_out, r)
    assert_close(y, r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps) * weight)


def test_gemm_reference_in_row_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", 4 * 4 * (512 + 256))  # four rows
    a, b = _args("gemm", 10)
    assert_within(get_task("gemm").reference(a, b), a @ b, matmul_bound(a, b), "gemm in row chunks")


def test_moe_reference_in_token_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", 5 * 4 * (5 * 128 + 4 * 64))  # five tokens
    x, logits, w_gate_up, w_down, top_k = _args("moe", 13)
    inter = w_down.shape[2]
    expected = torch.zeros_like(x)
    for t in range(x.shape[0]):
        weights, ids = torch.topk(torch.softmax(logits[t], dim=0), top_k)
        for w, e in zip(weights / weights.sum(), ids.tolist(), strict=True):
            gate, up = w_gate_up[e, :inter] @ x[t], w_gate_up[e, inter:] @ x[t]
            expected[t] += w * (w_down[e] @ (F.silu(gate) * up))
    got = get_task("moe").reference(x, logits, w_gate_up, w_down, top_k)
    assert_within(got, expected, _moe_bound(x, logits, w_gate_up, w_down, top_k), "moe in token chunks")


def _moe_bound(
    x: torch.Tensor, logits: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, top_k: int
) -> torch.Tensor:
    """Per element, how far two fp32 formulations of the MoE may differ: each expert's gate and up
    matmuls' bounds carried through SwiGLU (|silu'| < 1.1), then its down matmul's; the routing
    weights and the sum over the k experts add a few u of each term."""
    inter = w_down.shape[2]
    bound = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        weights, ids = torch.topk(torch.softmax(logits[t].double(), dim=0), top_k)
        column = x[t, :, None]
        for w, e in zip((weights / weights.sum()).tolist(), ids.tolist(), strict=True):
            gate, up = (
                w_gate_up[e, rows].double() @ column.double() for rows in (slice(inter), slice(inter, None))
            )
            gate_err = matmul_bound(w_gate_up[e, :inter], column)
            up_err = matmul_bound(w_gate_up[e, inter:], column)
            act = F.silu(gate) * up
            act_err = 1.1 * up.abs() * gate_err + F.silu(gate).abs() * up_err + 2 * U * act.abs()
            out = w_down[e].double() @ act
            out_err = w_down[e].double().abs() @ act_err + matmul_bound(w_down[e], act)
            bound[t] += w * (out_err + 4 * top_k * U * out.abs())[:, 0]
    return bound


def test_sampling_reference_in_row_chunks_draws_each_request_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _args("sampling", 11, seed=2)
    whole = get_task("sampling").reference(*args)
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", 3 * 64 * 256)  # three requests of V = 256
    assert torch.equal(get_task("sampling").reference(*args), whole)
    logits, temperature, top_k, top_p, seed = args
    for i in range(logits.shape[0]):
        t = float(temperature[i])
        if t <= 0:
            assert int(whole[i]) == int(logits[i].argmax())
            continue
        probs = filtered_distribution(logits[i], t, int(top_k[i]), float(top_p[i])).probs
        order = torch.argsort(logits[i].double() / t, descending=True, stable=True)
        u = float(torch.rand((), generator=torch.Generator().manual_seed(int(seed[i]))))
        cdf = torch.cumsum(probs[order], 0)
        pick = int(torch.searchsorted(cdf, torch.tensor([u * float(cdf[-1])]), right=True).clamp(max=255))
        assert int(whole[i]) == int(order[pick])


def test_gdn_reference_in_sequence_and_token_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    batch, length, heads, dk, dv = 3, 20, 2, 32, 32
    # Two of three sequences and seven of 20 tokens a block: neither divides its axis.
    budget = 2 * 3 * heads * dk * dv * 4 + 2 * 7 * heads * (2 * dk + 3 * dv + 2) * 4
    assert recurrence_blocks(batch, length, heads, dk, dv, budget) == (2, 7)
    monkeypatch.setattr(_scratch, "SCRATCH_BYTES", budget)
    task = get_task("gdn")
    shape = Workload("blocks", {"B": batch, "T": length, "Hh": heads, "Dk": dk, "Dv": dv})
    q, k, v, g, beta, scale = task.workload_inputs(
        shape, torch.Generator().manual_seed(0), CPU, torch.float32
    )
    expected = torch.empty_like(v)
    for b in range(batch):
        for h in range(heads):
            state = torch.zeros(dk, dv)
            for t in range(length):
                state = torch.exp(g[b, t, h]) * state
                u = beta[b, t, h] * (v[b, t, h] - k[b, t, h] @ state)
                state = state + torch.outer(k[b, t, h], u)
                expected[b, t, h] = scale * (q[b, t, h] @ state)
    assert_close(task.reference(q, k, v, g, beta, scale), expected)
