"""Family-specific sources and sinks: attention (split-KV decode), gemm (persistent), moe, sampling."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import available, get_task

HEAD = """
import torch
import triton
import triton.language as tl
"""


def analyze(tmp_path: Path, task: str, code: str):
    if task not in available():
        pytest.skip(f"task {task} is not installed")
    path = tmp_path / "cand.py"
    path.write_text(HEAD + textwrap.dedent(code))
    sink = next((i for i, line in enumerate(path.read_text().splitlines(), 1) if "# SINK" in line), None)
    violations, unresolved = run_static(path, get_task(task))
    return violations, unresolved, sink


DECODE = """
@triton.jit
def _decode_part(q_ptr, k_ptr, v_ptr, lens_ptr, out_ptr, chunk,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    req = tl.program_id(0)
    part = tl.program_id(2)
    seq_len = tl.load(lens_ptr + req)
    start = part * chunk
    end = tl.minimum(start + chunk, seq_len)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + req * HEAD_DIM + offs_d)
    m = float("-inf")
    l = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        toks = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + toks[:, None] * HEAD_DIM + offs_d[None, :], mask=(toks < end)[:, None], other=0.0)
        s = tl.where(toks < end, tl.sum(k * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        v = tl.load(v_ptr + toks[:, None] * HEAD_DIM + offs_d[None, :], mask=(toks < end)[:, None], other=0.0)
        l = l * tl.exp(m - m_new) + tl.sum(p, axis=0)
        acc = acc * tl.exp(m - m_new) + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    tl.store(out_ptr + (req * tl.num_programs(2) + part) * HEAD_DIM + offs_d, acc / l)

def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
    batch = seq_lens.shape[0]
    longest = int(seq_lens.max())
    chunk = {chunk}
    parts = triton.cdiv(longest, chunk)
    out = torch.empty((batch, parts, q.shape[-1]), device=q.device)
    _decode_part[(batch, 1, parts)](q, k_cache, v_cache, seq_lens, out, chunk,  # SINK
                                    HEAD_DIM=q.shape[-1], BLOCK_N=32)
    return out
"""


def test_fixed_split_size_decode_passes(tmp_path: Path) -> None:
    violations, _, _ = analyze(tmp_path, "attention_decode", DECODE.replace("{chunk}", "256"))
    assert violations == [], [(f.rule, f.message) for f in violations]


@pytest.mark.parametrize(
    ("chunk", "source"),
    [
        ("max(64, 8192 // batch)", "seq_lens.shape[0]"),
        ("triton.cdiv(longest, 4)", "batch statistic"),
        ("max(64, 4096 // block_table.size(0))", "block_table.size(0)"),
        ("max(64, k_cache.shape[0] // 8)", "k_cache.shape[0]"),
    ],
)
def test_split_size_from_the_batch_context_is_caught(tmp_path: Path, chunk: str, source: str) -> None:
    violations, _, sink = analyze(tmp_path, "attention_decode", DECODE.replace("{chunk}", chunk))
    f = next(f for f in violations if f.protected == "chunk")
    assert f.mechanism == "work_partitioning" and f.line == sink
    assert any(source in step for step in f.path), f.path


def test_heads_times_batch_is_a_batch_source(tmp_path: Path) -> None:
    code = """
    def kernel(q, k, v, causal, sm_scale):
        programs = q.shape[0] * q.shape[1]
        num_kv_splits = max(1, 132 // programs)
        return torch.ops.mylib.attention(q, k, v, causal, sm_scale, num_kv_splits=num_kv_splits)  # SINK
    """
    violations, _, sink = analyze(tmp_path, "attention_prefill", code)
    f = next(f for f in violations if f.line == sink)
    assert f.protected in ("NUM_SPLITS", "NUM_KV_SPLITS") and "q.shape[0]" in f.path[0]


def test_persistent_matmul_passes(tmp_path: Path) -> None:
    code = """
    NUM_SMS = 132

    @triton.jit
    def _persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
        num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
            pid_m = tile // tl.cdiv(N, BLOCK_N)
            pid_n = tile % tl.cdiv(N, BLOCK_N)
            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                offs_k = k0 + tl.arange(0, BLOCK_K)
                a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :], mask=offs_m[:, None] < M)
                b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :], mask=offs_n[None, :] < N)
                acc = tl.dot(a, b, acc)
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=offs_m[:, None] < M)

    def kernel(a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        tiles = triton.cdiv(M, 64) * triton.cdiv(N, 64)
        _persistent[(min(NUM_SMS, tiles),)](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return c
    """
    violations, _, _ = analyze(tmp_path, "gemm", code)
    assert violations == [], [(f.rule, f.message) for f in violations]


def test_rows_per_program_from_batch_passes(tmp_path: Path) -> None:
    code = """
    @triton.jit
    def _rows(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, ROWS: tl.constexpr, BLOCK_H: tl.constexpr):
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK_H)
        ok = (rows[:, None] < n_rows) & (cols[None, :] < hidden)
        x = tl.load(x_ptr + rows[:, None] * hidden + cols[None, :], mask=ok, other=0.0)
        x = tl.where(rows[:, None] < n_rows, x, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
        w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0)
        tl.store(y_ptr + rows[:, None] * hidden + cols[None, :], x * rstd[:, None] * w[None, :], mask=ok)

    def kernel(x, weight, eps):
        n_rows, hidden = x.shape
        rows = 8 if n_rows >= 4096 else 1
        y = torch.empty_like(x)
        _rows[(triton.cdiv(n_rows, rows),)](x, weight, y, n_rows, hidden, eps, ROWS=rows,
                                            BLOCK_H=triton.next_power_of_2(hidden))
        return y
    """
    violations, _, _ = analyze(tmp_path, "rmsnorm", code)
    assert violations == [], [(f.rule, f.message) for f in violations]


MOE = """
def kernel(x, router_logits, w_gate_up, w_down, top_k):
    T, H = x.shape
    E = router_logits.shape[1]
    {routing}
    y = torch.zeros_like(x)
    # One token's rows at a time: a GEMM on an expert's gathered tokens (``x[rows] @ W``) would have
    # as many rows as the expert's load, a batch quantity (library_kernel_by_shape).
    for t in range(T):
        for s in range(top_k):
            e = int(ids[t, s])
            gate, up = (x[t : t + 1] @ w_gate_up[e].t()).chunk(2, dim=-1)
            act = torch.nn.functional.silu(gate) * up
            y[t] += (weights[t, s] * (act @ w_down[e].t()))[0].to(x.dtype)
    return y
"""


@pytest.mark.parametrize(
    ("routing", "expected"),
    [
        (
            "weights, ids = torch.topk(torch.softmax(router_logits, dim=-1), top_k, dim=-1)\n"
            "    weights = weights / weights.sum(dim=-1, keepdim=True)",
            None,
        ),
        (
            "capacity = int(1.25 * T * top_k / E)\n"
            "    weights, ids = torch.topk(torch.softmax(router_logits, dim=-1), top_k, dim=-1)  # SINK\n"
            "    ids = torch.where(torch.arange(T)[:, None] < capacity, ids, -1)",
            "EXPERT_CAPACITY",
        ),
        (
            "probs = torch.softmax(router_logits, dim=-1)\n"
            "    weights, ids = torch.topk(probs, top_k, dim=0)  # SINK",
            "ROUTING",
        ),
        (
            "load = torch.bincount(router_logits.argmax(-1), minlength=E)\n"
            "    weights, ids = torch.topk(router_logits - 0.01 * load, top_k, dim=-1)  # SINK",
            "ROUTING",
        ),
    ],
)
def test_moe_routing(tmp_path: Path, routing: str, expected: str | None) -> None:
    violations, _, _ = analyze(tmp_path, "moe", MOE.replace("{routing}", routing))
    if expected is None:
        assert violations == [], [(f.rule, f.line, f.message) for f in violations]
    else:
        f = next(f for f in violations if f.protected == expected)
        assert f.mechanism == "expert_routing"


SAMPLING = """
def kernel(logits, temperature, top_k, top_p, seed):
    probs = torch.softmax(logits / temperature.clamp_min(1e-6)[:, None], dim=-1)
    {draw}
    return out
"""


@pytest.mark.parametrize(
    ("draw", "violates"),
    [
        (
            "out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)\n"
            "    for i in range(logits.shape[0]):\n"
            "        g = torch.Generator(device=logits.device).manual_seed(int(seed[i]))\n"
            "        out[i] = torch.multinomial(probs[i], 1, generator=g)[0]",
            False,
        ),
        ("torch.manual_seed(int(seed[0]))\n    out = torch.multinomial(probs, 1)[:, 0]  # SINK", True),
        (
            "g = torch.Generator(device=logits.device).manual_seed(int(seed[0]))\n"
            "    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)\n"
            "    for i in range(logits.shape[0]):\n"
            "        out[i] = torch.multinomial(probs[i], 1, generator=g)[0]  # SINK",
            True,
        ),
        (
            "out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)\n"
            "    for i in range(logits.shape[0]):\n"
            "        torch.manual_seed(int(seed[0]) + i)\n"
            "        out[i] = torch.multinomial(probs[i], 1)[0]",
            True,
        ),
    ],
)
def test_sampling_random_streams(tmp_path: Path, draw: str, violates: bool) -> None:
    violations, _, sink = analyze(tmp_path, "sampling", SAMPLING.replace("{draw}", draw))
    if violates:
        f = next(f for f in violations if f.mechanism == "rng")
        assert sink is None or f.line == sink
    else:
        assert violations == [], [(f.rule, f.line, f.message) for f in violations]
