"""Less direct flows (memo tables, key functions, filters, gathers) and equivalences that must pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import available, get_task

HEAD = """
import dataclasses
import torch
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        m = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=m, other=0.0)
        tl.store(y_ptr + row * hidden + start + offs, x * rstd, mask=m)


@triton.jit
def _rows_persistent(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, BLOCK_H: tl.constexpr):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        offs = tl.arange(0, BLOCK_H)
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
        for start in range(0, hidden, BLOCK_H):
            m = start + offs < hidden
            x = tl.load(x_ptr + row * hidden + start + offs, mask=m, other=0.0)
            tl.store(y_ptr + row * hidden + start + offs, x * rstd, mask=m)
"""


def analyze(tmp_path: Path, body: str, task: str = "rmsnorm"):
    if task not in available():
        pytest.skip(f"task {task} is not installed")
    path = tmp_path / "cand.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return run_static(path, get_task(task))


CAUGHT = {
    "same_kernel_other_tile_literals": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            if x.shape[0] < 16:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256)
            else:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
    "launch_options_unpacked_from_a_batch_chosen_dict": """
        def _opts(n):
            return {"BLOCK_H": 256} if n < 16 else {"BLOCK_H": 1024}

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, **_opts(x.shape[0]))
            return y
        """,
    "negated_threshold": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            tile = 1024
            if not (x.shape[0] >= 16):
                tile = 256
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=tile)
            return y
        """,
    "memo_keyed_by_batch": """
        _TILES = {}

        def kernel(x, weight, eps):
            tile = _TILES.setdefault(x.shape[0], 256 if x.shape[0] < 8 else 1024)
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=tile)
            return y
        """,
    "nearest_bucket_by_key_function": """
        BUCKETS = {1: 128, 16: 512, 256: 1024}

        def kernel(x, weight, eps):
            m = x.shape[0]
            tile = BUCKETS[min(BUCKETS, key=lambda b: abs(b - m))]
            y = torch.empty_like(x)
            _row[(m,)](x, weight, y, x.shape[1], eps, BLOCK_H=tile)
            return y
        """,
    "first_matching_config": """
        @dataclasses.dataclass(frozen=True)
        class Cfg:
            max_rows: int
            tile: int

        CONFIGS = [Cfg(8, 256), Cfg(1 << 30, 1024)]

        def kernel(x, weight, eps):
            cfg = next(c for c in CONFIGS if x.shape[0] <= c.max_rows)
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=cfg.tile)
            return y
        """,
    "tile_from_a_count_of_masked_rows": """
        def kernel(x, weight, eps):
            # A comparison keeps the batch axis: the count of the rows it selects is a batch statistic.
            busy = int((x.abs().amax(dim=1) > 0).sum())
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=256 if busy < 8 else 1024)
            return y
        """,
    "whole_batch_torch_matmul": """
        def kernel(x, weight, eps):
            ones = torch.ones((x.shape[1], 1), device=x.device)
            ss = (x * x) @ ones
            return x * torch.rsqrt(ss / x.shape[1] + eps) * weight
        """,
}


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_indirect_flow_is_caught(tmp_path: Path, name: str) -> None:
    violations, _ = analyze(tmp_path, CAUGHT[name])
    assert violations, name
    assert all(f.path and f.guidance for f in violations)


PASSING = {
    "launch_options_unpacked_from_a_dict_chosen_by_the_hidden_size": """
        def _opts(n):
            return {"BLOCK_H": 256} if n < 512 else {"BLOCK_H": 1024}

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, **_opts(x.shape[1]))
            return y
        """,
    "persistent_variant_for_large_batches": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            if x.shape[0] > 4096:
                _rows_persistent[(132,)](x, weight, y, x.shape[0], x.shape[1], eps, BLOCK_H=1024)
            else:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
    "tail_rows_by_the_same_kernel": """
        def _launch(x, weight, y, eps):
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            full = x.shape[0] // 16 * 16
            if full:
                _launch(x[:full], weight, y[:full], eps)
            if full < x.shape[0]:
                _launch(x[full:], weight, y[full:], eps)
            return y
        """,
    "rows_gathered_by_a_mask": """
        def kernel(x, weight, eps):
            # Gathering the rows a batch-wide mask selects is not a finding by itself: each row is
            # still normalised on its own.
            y = torch.zeros_like(x)
            rows = (x.abs().amax(dim=1) > 0).nonzero()[:, 0]
            xs = x[rows].float()
            y[rows] = (xs * torch.rsqrt(xs.pow(2).mean(dim=-1, keepdim=True) + eps) * weight).to(x.dtype)
            return y
        """,
    "one_row_matmul_per_sample": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            ones = torch.ones((x.shape[1], 1), device=x.device)
            for t in range(x.shape[0]):
                ss = (x[t : t + 1] * x[t : t + 1]) @ ones
                y[t] = (x[t] * torch.rsqrt(ss[0] / x.shape[1] + eps) * weight)
            return y
        """,
}


@pytest.mark.parametrize("name", sorted(PASSING))
def test_equivalent_paths_pass(tmp_path: Path, name: str) -> None:
    violations, _ = analyze(tmp_path, PASSING[name])
    assert violations == [], [(f.rule, f.line, f.message) for f in violations]


def test_different_tiles_on_the_two_paths_are_not_equivalent(tmp_path: Path) -> None:
    body = PASSING["persistent_variant_for_large_batches"].replace(
        "eps, BLOCK_H=1024)\n            else", "eps, BLOCK_H=512)\n            else"
    )
    violations, _ = analyze(tmp_path, body)
    assert [f.mechanism for f in violations] == ["algorithm_selection"]


MOE = """
def _expert(rows, w_gate_up, w_down, e):
    inter = w_down.shape[2]
    gate_up = rows.float() @ w_gate_up[e].float().t()
    return (torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]) @ w_down[e].float().t()


def kernel(x, router_logits, w_gate_up, w_down, top_k):
    weights, ids = torch.topk(torch.softmax(router_logits.float(), dim=-1), top_k, dim=-1)
    y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    {body}
    return y.to(x.dtype)
"""


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (
            "load = torch.bincount(ids.reshape(-1), minlength=w_down.shape[0])\n"
            "    for e in torch.argsort(load, descending=True).tolist():\n"
            "        tokens, slots = torch.nonzero(ids == e, as_tuple=True)\n"
            "        for t, s in zip(tokens.tolist(), slots.tolist()):\n"
            "            y[t] += weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, e)[0]",
            "accumulation_order_from_batch",
        ),
        (
            "for e in range(w_down.shape[0]):\n"
            "        tokens, slots = torch.nonzero(ids == e, as_tuple=True)\n"
            "        y[tokens] += weights[tokens, slots, None] * _expert(x[tokens], w_gate_up, w_down, e)",
            "library_kernel_by_shape",
        ),
        (
            "for t in range(x.shape[0]):\n"
            "        for s in range(top_k):\n"
            "            y[t] += weights[t, s] * _expert(x[t : t + 1], w_gate_up, w_down, int(ids[t, s]))[0]",
            None,
        ),
    ],
)
def test_moe_combine_order_and_grouped_matmul(tmp_path: Path, body: str, rule: str | None) -> None:
    violations, _ = analyze(tmp_path, MOE.replace("{body}", body), task="moe")
    if rule is None:
        assert violations == [], [(f.rule, f.line) for f in violations]
    else:
        assert rule in {f.rule for f in violations}


def test_block_table_width_is_batch_context(tmp_path: Path) -> None:
    body = """
        def kernel(q, k_cache, v_cache, block_table, seq_lens, sm_scale):
            widest = block_table.shape[1] * k_cache.shape[1]
            return torch.ops.mylib.decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale,
                                          num_kv_splits=max(1, widest // 1024))
    """
    violations, _ = analyze(tmp_path, body, task="attention_decode")
    f = violations[0]
    assert f.protected in ("NUM_SPLITS", "NUM_KV_SPLITS") and "block_table.shape[1]" in f.path[0]


def test_dot_precision_chosen_from_the_batch(tmp_path: Path) -> None:
    body = """
        @triton.jit
        def _mm(a_ptr, b_ptr, c_ptr, K, N, PRECISION: tl.constexpr, BLOCK_K: tl.constexpr):
            rows = tl.program_id(0) * 16 + tl.arange(0, 16)
            cols = tl.arange(0, 16)
            acc = tl.zeros((16, 16), dtype=tl.float32)
            for k in range(0, K, BLOCK_K):
                ks = k + tl.arange(0, BLOCK_K)
                a = tl.load(a_ptr + rows[:, None] * K + ks[None, :])
                b = tl.load(b_ptr + ks[:, None] * N + cols[None, :])
                acc = tl.dot(a, b, acc, input_precision=PRECISION)
            tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)

        def kernel(a, b):
            c = torch.empty((a.shape[0], b.shape[1]), device=a.device)
            mode = "tf32" if a.shape[0] >= 8 else "ieee"
            _mm[(a.shape[0] // 16,)](a, b, c, a.shape[1], b.shape[1], PRECISION=mode, BLOCK_K=32)
            return c
    """
    violations, _ = analyze(tmp_path, body, task="gemm")
    assert [(f.protected, f.mechanism) for f in violations] == [("PRECISION", "algorithm_selection")]
