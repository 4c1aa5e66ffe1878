"""Triton-specific sinks: reduction tiles read from the kernel body, grid axes, autotune, atomics, RNG."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

MATMUL = """
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped tile order (a swizzle): which tile a program takes, not how a row is reduced.
    group = pid // (GROUP_M * num_pid_n)
    first_m = group * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % (GROUP_M * num_pid_n)) // size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=offs_m[:, None] < M)
"""


def analyze(tmp_path: Path, code: str, task: str = "gemm"):
    path = tmp_path / "cand.py"
    path.write_text(textwrap.dedent(code))
    sink = next((i for i, line in enumerate(path.read_text().splitlines(), 1) if "# SINK" in line), None)
    violations, unresolved = run_static(path, get_task(task))
    return violations, unresolved, sink


def launch(block_m: str = "64", block_k: str = "32", extra: str = "") -> str:
    return (
        MATMUL
        + f"""
def kernel(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    _matmul[grid](a, b, c, M, N, K, BLOCK_M={block_m}, BLOCK_N=64,  # SINK
                  BLOCK_K={block_k}, GROUP_M=8{extra})
    return c
"""
    )


def test_k_tile_from_m_is_a_reduction_tile(tmp_path: Path) -> None:
    violations, _, sink = analyze(tmp_path, launch(block_k="16 if M < 64 else 64"))
    f = next(f for f in violations if f.protected == "BLOCK_K")
    assert (f.mechanism, f.rule, f.line) == ("reduction_order", "reduction_tile_from_batch", sink)
    assert "tl.dot" in f.path[-1] or "range" in f.path[-1]


def test_m_tile_from_m_and_the_swizzle_are_harmless(tmp_path: Path) -> None:
    violations, _, _ = analyze(tmp_path, launch(block_m="16 if M <= 16 else 128"))
    assert violations == []


def test_num_warps_with_dot_only_is_left_to_dynamic(tmp_path: Path) -> None:
    violations, unresolved, _ = analyze(tmp_path, launch(extra=", num_warps=2 if M < 16 else 8"))
    assert violations == []
    assert [f.rule for f in unresolved] == ["launch_option_unknown_order"]


AUTOTUNED = (
    MATMUL.replace(
        "@triton.jit\ndef _matmul",
        """@triton.autotune(
    configs=[
        triton.Config({{'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': {k1}}}, num_warps=4),
        triton.Config({{'BLOCK_M': 128, 'BLOCK_N': 64, 'BLOCK_K': {k2}}}, num_warps=4),
    ],
    key={key},
)
@triton.jit
def _matmul""",
    )
    + """
def kernel(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    _matmul[lambda meta: (triton.cdiv(M, meta['BLOCK_M']) * triton.cdiv(N, meta['BLOCK_N']),)](  # SINK
        a, b, c, M, N, K, GROUP_M=8)
    return c
"""
)


@pytest.mark.parametrize(
    ("key", "k1", "k2", "expected"),
    [
        ("['M', 'N', 'K']", 32, 64, "violation"),
        ("['N', 'K']", 32, 64, "unresolved"),
        ("['M', 'N', 'K']", 32, 32, "pass"),
    ],
)
def test_autotune_key(tmp_path: Path, key: str, k1: int, k2: int, expected: str) -> None:
    code = AUTOTUNED.replace("{key}", key).replace("{k1}", str(k1)).replace("{k2}", str(k2))
    code = code.replace("{{", "{").replace("}}", "}")
    violations, unresolved, sink = analyze(tmp_path, code)
    if expected == "violation":
        f = next(f for f in violations if f.rule == "autotune_key_has_batch")
        assert f.protected == "M" and f.line == sink and "a.shape[0]" in f.path[0]
    elif expected == "unresolved":
        assert violations == [] and [f.rule for f in unresolved] == ["autotune_opaque"]
    else:
        assert violations == [] and unresolved == []


def test_heuristic_deriving_the_k_tile_from_m(tmp_path: Path) -> None:
    code = (
        MATMUL.replace(
            "@triton.jit\ndef _matmul",
            "@triton.heuristics({'BLOCK_K': lambda args: 16 if args['M'] < 64 else 64})\n"
            "@triton.jit\ndef _matmul",
        )
        + """
def kernel(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    _matmul[grid](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, GROUP_M=8)  # SINK
    return c
"""
    )
    violations, _, sink = analyze(tmp_path, code)
    f = next(f for f in violations if f.rule == "heuristic_from_batch")
    assert f.protected == "BLOCK_K" and f.line == sink


SPLIT_K = (
    MATMUL
    + """
@triton.jit
def _matmul_split_k(a_ptr, b_ptr, part_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(pid_k * BLOCK_K, K, BLOCK_K * tl.num_programs(2)):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
        b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :])
        acc += tl.dot(a, b)
    tl.store(part_ptr + pid_k * M * N + offs_m[:, None] * N + offs_n[None, :], acc)

def kernel(a, b):
    M, K = a.shape
    N = b.shape[1]
    k_parts = {k_parts}
    part = torch.empty((k_parts, M, N), device=a.device, dtype=torch.float32)
    _matmul_split_k[(triton.cdiv(M, 32), triton.cdiv(N, 32), k_parts)](a, b, part, M, N, K,  # SINK
                                                                        BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    return part.sum(0).to(a.dtype)
"""
)


def test_grid_axis_that_splits_the_reduction(tmp_path: Path) -> None:
    violations, _, sink = analyze(tmp_path, SPLIT_K.replace("{k_parts}", "4 if M < 128 else 1"))
    f = next(f for f in violations if f.mechanism == "work_partitioning")
    assert f.protected == "NUM_SPLITS" and f.line == sink and "grid axis 2" in f.message


def test_fixed_split_count_passes(tmp_path: Path) -> None:
    violations, _, _ = analyze(tmp_path, SPLIT_K.replace("{k_parts}", "max(1, K // 1024)"))
    assert violations == []


NORM_HEAD = """
import torch
import triton
import triton.language as tl
"""


def test_float_atomic_accumulation(tmp_path: Path) -> None:
    code = (
        NORM_HEAD
        + """
@triton.jit
def _sumsq_atomic(x_ptr, out_ptr, hidden, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    offs = chunk * BLOCK_H + tl.arange(0, BLOCK_H)
    x = tl.load(x_ptr + row * hidden + offs, mask=offs < hidden, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x * x, axis=0))  # SINK

def kernel(x, weight, eps):
    sumsq = torch.zeros(x.shape[0], device=x.device)
    _sumsq_atomic[(x.shape[0], triton.cdiv(x.shape[1], 256))](x, sumsq, x.shape[1], BLOCK_H=256)
    return x * torch.rsqrt(sumsq[:, None] / x.shape[1] + eps) * weight
"""
    )
    violations, _, sink = analyze(tmp_path, code, task="rmsnorm")
    f = next(f for f in violations if f.mechanism == "atomics")
    assert f.rule == "float_atomic_accumulation" and f.line == sink


def test_integer_atomic_counter_passes(tmp_path: Path) -> None:
    code = (
        NORM_HEAD
        + """
@triton.jit
def _row(x_ptr, y_ptr, count_ptr, hidden, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    x = tl.load(x_ptr + row * hidden + offs, mask=offs < hidden, other=0.0)
    tl.store(y_ptr + row * hidden + offs, x / tl.sqrt(tl.sum(x * x, axis=0) / hidden), mask=offs < hidden)
    tl.atomic_add(count_ptr, 1)

def kernel(x, weight, eps):
    y = torch.empty_like(x)
    done = torch.zeros(1, dtype=torch.int32, device=x.device)
    _row[(x.shape[0],)](x, y, done, x.shape[1], BLOCK_H=triton.next_power_of_2(x.shape[1]))
    return y * weight
"""
    )
    violations, unresolved, _ = analyze(tmp_path, code, task="rmsnorm")
    assert violations == [] and unresolved == []


def test_persistent_grid_stride_loop_passes(tmp_path: Path) -> None:
    code = (
        NORM_HEAD
        + """
NUM_SMS = 132

@triton.jit
def _rows_persistent(x_ptr, y_ptr, n_rows, hidden, BLOCK_H: tl.constexpr):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        offs = tl.arange(0, BLOCK_H)
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden)
        for start in range(0, hidden, BLOCK_H):
            x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
            tl.store(y_ptr + row * hidden + start + offs, x * rstd, mask=start + offs < hidden)

def kernel(x, weight, eps):
    n_rows, hidden = x.shape
    y = torch.empty_like(x)
    _rows_persistent[(min(n_rows, NUM_SMS),)](x, y, n_rows, hidden, BLOCK_H=1024)
    return y * weight
"""
    )
    violations, _, _ = analyze(tmp_path, code, task="rmsnorm")
    assert violations == []


SAMPLER = (
    NORM_HEAD
    + """
@triton.jit
def _gumbel_argmax(logits_ptr, seed_ptr, out_ptr, vocab, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_V)
    seed = tl.load(seed_ptr + {seed_index})
    u = tl.rand(seed, {offsets})  # SINK
    x = tl.load(logits_ptr + row * vocab + offs, mask=offs < vocab, other=-float("inf"))
    g = x - tl.log(-tl.log(u))
    tl.store(out_ptr + row, tl.argmax(g, axis=0))

def kernel(logits, temperature, top_k, top_p, seed):
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    _gumbel_argmax[(logits.shape[0],)](logits, seed, out, logits.shape[1],
                                       BLOCK_V=triton.next_power_of_2(logits.shape[1]))
    return out
"""
)


@pytest.mark.parametrize(
    ("seed_index", "offsets", "violates"),
    [("row", "offs", False), ("0", "row * vocab + offs", True), ("0", "offs", False)],
)
def test_random_numbers_keyed_by_position(
    tmp_path: Path, seed_index: str, offsets: str, violates: bool
) -> None:
    code = SAMPLER.replace("{seed_index}", seed_index).replace("{offsets}", offsets)
    violations, _, _ = analyze(tmp_path, code, task="sampling")
    if violates:
        f = next(f for f in violations if f.mechanism == "rng")
        assert f.rule == "rng_seed_from_batch" and "program_id(0)" in f.path[-1]
    else:
        assert violations == []


SAMPLER_WITH_HELPERS = (
    NORM_HEAD
    + """
@triton.jit
def _own_seed(seed_ptr, row):
    return tl.load(seed_ptr + row)


@triton.jit
def _offsets(row, vocab, offs):
    return {helper_offsets}


@triton.jit
def _gumbel_argmax(logits_ptr, seed_ptr, out_ptr, vocab, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_V)
    u = tl.rand(_own_seed(seed_ptr, row), _offsets(row, vocab, offs))  # SINK
    x = tl.load(logits_ptr + row * vocab + offs, mask=offs < vocab, other=-float("inf"))
    g = x - tl.log(-tl.log(u))
    tl.store(out_ptr + row, tl.argmax(g, axis=0))

def kernel(logits, temperature, top_k, top_p, seed):
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    _gumbel_argmax[(logits.shape[0],)](logits, seed, out, logits.shape[1],
                                       BLOCK_V=triton.next_power_of_2(logits.shape[1]))
    return out
"""
)


@pytest.mark.parametrize(("helper_offsets", "violates"), [("offs", False), ("row * vocab + offs", True)])
def test_helpers_return_what_their_results_depend_on(
    tmp_path: Path, helper_offsets: str, violates: bool
) -> None:
    # The row only addresses the seed's load: the loaded value is the request's own seed, not its
    # position. A helper that returns the row itself (in the offsets) still keys the draw by it.
    code = SAMPLER_WITH_HELPERS.replace("{helper_offsets}", helper_offsets)
    violations, _, _ = analyze(tmp_path, code, task="sampling")
    if violates:
        f = next(f for f in violations if f.mechanism == "rng")
        assert f.rule == "rng_seed_from_batch" and "program_id(0)" in f.path[-1]
    else:
        assert violations == [], [(f.rule, f.message) for f in violations]


SAMPLER_WITH_FLAG = (
    NORM_HEAD
    + """
@triton.jit
def _inverse_cdf(logits_ptr, seed_ptr, out_ptr, vocab, BLOCK_V: tl.constexpr, OFFSET_BY_ROW: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_V)
    seed = tl.load(seed_ptr + row)
    ctr = tl.arange(0, 1)
    if OFFSET_BY_ROW:
        ctr += row
    u = tl.sum(tl.rand(seed, ctr), axis=0)  # SINK
    x = tl.load(logits_ptr + row * vocab + offs, mask=offs < vocab, other=-float("inf"))
    p = tl.exp(x - tl.max(x, axis=0))
    pos = tl.sum((tl.cumsum(p, axis=0) <= u * tl.sum(p, axis=0)).to(tl.int32), axis=0)
    tl.store(out_ptr + row, pos)

def kernel(logits, temperature, top_k, top_p, seed):
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    _inverse_cdf[(logits.shape[0],)](logits, seed, out, logits.shape[1],
                                     BLOCK_V=triton.next_power_of_2(logits.shape[1]), OFFSET_BY_ROW={flag})
    return out
"""
)


@pytest.mark.parametrize(("flag", "violates"), [("False", False), ("True", True)])
def test_a_constexpr_flag_passed_as_a_literal_picks_the_compiled_branch(
    tmp_path: Path, flag: str, violates: bool
) -> None:
    # The launch compiles one side of ``if OFFSET_BY_ROW:``; only that side can key the draw.
    violations, _, _ = analyze(tmp_path, SAMPLER_WITH_FLAG.replace("{flag}", flag), task="sampling")
    rng = [f for f in violations if f.mechanism == "rng"]
    assert bool(rng) == violates, [(f.rule, f.message) for f in violations]


def test_constexpr_flag_choosing_a_different_reduction(tmp_path: Path) -> None:
    code = (
        NORM_HEAD
        + """
@triton.jit
def _row(x_ptr, y_ptr, hidden, BLOCK_H: tl.constexpr, ONE_SHOT: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    if ONE_SHOT:
        x = tl.load(x_ptr + row * hidden + offs, mask=offs < hidden, other=0.0)
        ss = tl.sum(x * x, axis=0)
    else:
        acc = tl.zeros([128], dtype=tl.float32)
        for start in range(0, hidden, 128):
            x = tl.load(x_ptr + row * hidden + start + tl.arange(0, 128))
            acc += x * x
        ss = tl.sum(acc, axis=0)
    tl.store(y_ptr + row, ss)

def kernel(x, weight, eps):
    y = torch.empty(x.shape[0], device=x.device)
    _row[(x.shape[0],)](x, y, x.shape[1], BLOCK_H=1024, ONE_SHOT=x.shape[0] > 64)  # SINK
    return y
"""
    )
    violations, _, sink = analyze(tmp_path, code, task="rmsnorm")
    f = next(f for f in violations if f.protected == "ONE_SHOT")
    assert f.mechanism == "algorithm_selection" and f.line == sink


def test_row_guard_in_the_kernel_passes(tmp_path: Path) -> None:
    code = (
        NORM_HEAD
        + """
@triton.jit
def _rows(x_ptr, y_ptr, n_rows, hidden, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    if row < n_rows:
        offs = tl.arange(0, BLOCK_H)
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
            acc += x * x
        tl.store(y_ptr + row, tl.sum(acc, axis=0) / hidden)

def kernel(x, weight, eps):
    n_rows = x.shape[0]
    y = torch.empty(n_rows, device=x.device)
    _rows[(triton.cdiv(n_rows, 8) * 8,)](x, y, n_rows, x.shape[1], BLOCK_H=256)
    return x * torch.rsqrt(y[:, None] + eps) * weight
"""
    )
    violations, _, _ = analyze(tmp_path, code, task="rmsnorm")
    assert violations == []


ROW_SCALE = """
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_rows(x_ptr, y_ptr, n_rows, H: tl.constexpr, ROUND: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)
    v = tl.load(x_ptr + row * H + offs).to(tl.float32) * 3.0
    if {cond}:
        v = v.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * H + offs, (v * 0.5).to(y_ptr.dtype.element_ty))


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    _scale_rows[(batch,)](x, y, batch, H=hidden, ROUND={flag})  # SINK
    return y
"""


def test_a_batch_dependent_constexpr_flag_that_rewrites_a_value_is_a_violation(tmp_path: Path) -> None:
    # Where the value is rounded to the storage dtype follows the batch: the stored values do too.
    violations, _, sink = analyze(tmp_path, ROW_SCALE.format(cond="ROUND", flag="batch > 16"), "rmsnorm")
    assert [(v.protected, v.line) for v in violations] == [("ROUND", sink)]
    # A setting of an elementwise computation: the full gate settles it by launching both settings.
    assert violations[0].rule == "elementwise_value_from_batch"
    assert "changes how _scale_rows computes each element" in violations[0].message


def test_a_constexpr_flag_from_the_problem_or_a_runtime_guard_is_not(tmp_path: Path) -> None:
    fixed = ROW_SCALE.format(cond="ROUND", flag="hidden > 2048")
    assert analyze(tmp_path, fixed, "rmsnorm")[0] == []
    # A runtime bound on the batch decides whether a program works, not what it computes.
    guard = ROW_SCALE.format(cond="row < n_rows", flag="True")
    assert analyze(tmp_path, guard, "rmsnorm")[0] == []


KDA_CHUNKS = Path(__file__).resolve().parents[1] / "nodice" / "examples" / "kda" / "chunk_size_from_tokens.py"
WHERE_RESTART = "        chunk_sum = tl.where((t + 1) % chunk == 0, 0.0, chunk_sum)\n"
IF_RESTART = "        if (t + 1) % chunk == 0:\n            chunk_sum = tl.full([LANES, DK], 0, tl.float32)\n"


def _kda_chunks(tmp_path: Path, chunk_from: str, guard: str = "") -> list:
    source = KDA_CHUNKS.read_text()
    assert WHERE_RESTART in source
    chosen = "    chunk = SHORT_CHUNK if batch * seq_len < LONG_CHUNK_FROM_TOKENS else LONG_CHUNK\n"
    assert chosen in source
    restart = IF_RESTART.replace(" == 0:", f" == 0{guard}:")
    source = source.replace(WHERE_RESTART, restart).replace(chosen, f"    chunk = {chunk_from}\n")
    return analyze(tmp_path, source, task="kda")[0]


def test_a_batch_dependent_runtime_value_deciding_where_a_loop_restarts_is_a_violation(
    tmp_path: Path,
) -> None:
    # ``if (t + 1) % chunk == 0: chunk_sum = 0`` is ``tl.where`` as a branch: the chunk, chosen from
    # B·T on the host, decides at which tokens the carried gate sum starts over.
    violations = _kda_chunks(
        tmp_path, "SHORT_CHUNK if batch * seq_len < LONG_CHUNK_FROM_TOKENS else LONG_CHUNK"
    )
    f = next(f for f in violations if f.rule == "batch_value_in_kernel_output")
    assert f.protected == "chunk" and any("q.shape[0]" in step for step in f.path), f.path


def test_a_restart_period_from_the_sequence_length_is_not(tmp_path: Path) -> None:
    # The same branch with a chunk chosen from the sample's own length: every sequence restarts
    # alike. A bound test beside it, even on a batch value (the lane count), is a guard.
    per_sample = "SHORT_CHUNK if seq_len < LONG_CHUNK_FROM_TOKENS else LONG_CHUNK"
    assert _kda_chunks(tmp_path, per_sample) == []
    assert _kda_chunks(tmp_path, per_sample, guard=" and t < n_lanes * seq_len") == []


SCALED_ROWS = """
import torch
import triton
import triton.language as tl


@triton.jit
def _half():
    return 0.5


@triton.jit
def _scale_rows(x_ptr, y_ptr, n_rows, hidden, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = 1.0
    if n_rows > 64:
        s = {value}
    x = tl.load(x_ptr + row * hidden + offs, mask=offs < hidden, other=0.0)
    tl.store(y_ptr + row * hidden + offs, x * s, mask=offs < hidden)


def kernel(x, weight, eps):
    y = torch.empty_like(x)
    _scale_rows[(x.shape[0],)](x, y, x.shape[0], x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
"""


@pytest.mark.parametrize("value", ["0.5", "_half()"])
def test_a_constant_chosen_under_a_batch_branch_reaches_the_output(tmp_path: Path, value: str) -> None:
    # The same rewrite of a value by a branch on the batch size, written inline or by a helper
    # that returns a constant: both are a batch-dependent output.
    violations, _unresolved, _sink = analyze(tmp_path, SCALED_ROWS.format(value=value), task="rmsnorm")
    assert violations, f"s = {value} under `if n_rows > 64:` was not found"
    assert any("n_rows" in v.message for v in violations), [v.message for v in violations]
