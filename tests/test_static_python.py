"""Static analysis of Python host code: batch sources, flows, and the harmless look-alikes that must pass.

Every case is a small rmsnorm candidate. A violating case marks its sink line with
``# SINK`` and names the mechanism, the protected parameter and a text the first
step of the dependency path must contain.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

ROW_KERNEL = """
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
        w = tl.load(w_ptr + start + offs, mask=m, other=0.0)
        tl.store(y_ptr + row * hidden + start + offs, x * rstd * w, mask=m)


@triton.jit
def _partial(x_ptr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(split * chunk, split * chunk + chunk, BLOCK_H):
        x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
        acc += x * x
    tl.store(part_ptr + row * num_splits + split, tl.sum(acc, axis=0))
"""


def analyze(tmp_path: Path, body: str, task: str = "rmsnorm", files: dict[str, str] | None = None):
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / "cand.py"
    path.write_text(ROW_KERNEL + textwrap.dedent(body))
    sink = next((i for i, line in enumerate(path.read_text().splitlines(), 1) if "# SINK" in line), None)
    violations, unresolved = run_static(path, get_task(task))
    return violations, unresolved, sink


VIOLATING = {
    "tile_from_shape0": (
        """
        def kernel(x, weight, eps):
            B = x.shape[0]
            y = torch.empty_like(x)
            blk = 256 if B < 16 else 1024
            _row[(B,)](x, weight, y, x.shape[1], eps, BLOCK_H=blk)  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "tile_from_size0": (
        """
        def kernel(x, weight, eps):
            rows = x.size(0)
            y = torch.empty_like(x)
            _row[(rows,)](x, weight, y, x.size(1), eps, BLOCK_H=min(1024, 64 * rows))  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.size(0)",
    ),
    "tile_from_numpy_heuristic": (
        """
        import numpy as np

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            blk = int(np.clip(2 ** np.ceil(np.log2(x.shape[0] * 8)), 128, 1024))
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=blk)  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "tile_from_len": (
        """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            n = len(x)
            _row[(n,)](x, weight, y, x.shape[1], eps, BLOCK_H=128 if n > 8 else 512)  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "len(x)",
    ),
    "tile_from_numel": (
        """
        def kernel(x, weight, eps):
            hidden = weight.shape[0]
            rows = x.numel() // hidden
            y = torch.empty_like(x)
            _row[(rows,)](x, weight, y, hidden, eps, BLOCK_H=triton.next_power_of_2(rows))  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.numel()",
    ),
    "splits_from_unpacked_shape": (
        """
        def kernel(x, weight, eps):
            B, H = x.shape
            splits = max(1, 132 // B)
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape[0]",
    ),
    "contract_symbol_of_unknown_origin": (
        """
        from .missing_helpers import rows_of

        def kernel(x, weight, eps):
            batch_size = rows_of(x)
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=32 * batch_size)  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "batch symbol 'batch_size'",
    ),
    "through_tuple_and_list": (
        """
        def kernel(x, weight, eps):
            cfg = (x.shape[0] // 4, 8)
            opts = [cfg[0], 2]
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=opts[0])  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "dict_lookup_keyed_by_batch": (
        """
        TILES = {1: 128, 2: 256, 4: 512}

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            blk = TILES.get(x.shape[0], 1024)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=blk)  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "function_argument_and_return": (
        """
        def pick_tile(rows, hidden):
            if rows < 16:
                return 128
            return triton.next_power_of_2(hidden)

        def launch(x, weight, y, eps, tile):
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=tile)  # SINK

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            launch(x, weight, y, eps, pick_tile(x.shape[0], x.shape[1]))
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "class_attribute": (
        """
        class Norm:
            def __init__(self, x):
                self.block = 256 if x.shape[0] < 8 else 1024

            def __call__(self, x, weight, eps):
                y = torch.empty_like(x)
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=self.block)  # SINK
                return y

        def kernel(x, weight, eps):
            return Norm(x)(x, weight, eps)
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "control_dependent_assignment": (
        """
        def kernel(x, weight, eps):
            if x.shape[0] <= 32:
                blk = 128
            else:
                blk = 1024
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=blk)  # SINK
            return y
        """,
        "reduction_order",
        "BLOCK_H",
        "x.shape[0]",
    ),
    "torch_fallback_for_small_batch": (
        """
        def kernel(x, weight, eps):
            if x.shape[0] < 4:  # SINK
                return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight)
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
        "algorithm_selection",
        "ALGORITHM",
        "x.shape[0]",
    ),
    "kernel_chosen_by_ternary": (
        """
        @triton.jit
        def _row_b(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
            pass

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            k = _row if x.shape[0] > 64 else _row_b
            k[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)  # SINK
            return y
        """,
        "algorithm_selection",
        "ALGORITHM",
        "x.shape[0]",
    ),
    "num_warps_from_batch": (
        """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024,  # SINK
                                num_warps=8 if x.shape[0] < 64 else 4)
            return y
        """,
        "reduction_order",
        "num_warps",
        "x.shape[0]",
    ),
    "split_keyword_to_library_call": (
        """
        import somelib

        def kernel(x, weight, eps):
            return somelib.norm(x, weight, eps, num_splits=max(1, 128 // x.shape[0]))  # SINK
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape[0]",
    ),
    "seed_from_batch_size": (
        """
        def kernel(x, weight, eps):
            torch.manual_seed(x.shape[0])  # SINK
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
        "rng",
        "RNG_SEED",
        "x.shape[0]",
    ),
    "truthy_flag_from_a_batch_threshold": (
        """
        def kernel(x, weight, eps):
            B, H = x.shape
            few = B < 8
            splits = 1
            if few:
                splits = 4
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape",
    ),
    "split_halved_while_batch_is_small": (
        """
        def kernel(x, weight, eps):
            B, H = x.shape
            splits = 8
            while splits > 1 and B * splits > 256:
                splits //= 2
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape",
    ),
    "split_set_in_except_branch": (
        """
        def kernel(x, weight, eps):
            B, H = x.shape
            try:
                if B < 16:
                    raise ValueError("small batch")
                splits = 1
            except ValueError:
                splits = 4
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape",
    ),
    "fallback_when_a_called_helper_raises": (
        """
        def _fast(x, weight, y, eps):
            B, H = x.shape
            if B < 16:
                raise RuntimeError("small batch")
            _row[(B,)](x, weight, y, H, eps, BLOCK_H=1024)

        def kernel(x, weight, eps):
            B, H = x.shape
            y = torch.empty_like(x)
            splits = 1
            try:
                _fast(x, weight, y, eps)
            except RuntimeError:
                splits = 4
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape",
    ),
    "split_set_when_an_assert_fails": (
        """
        def kernel(x, weight, eps):
            B, H = x.shape
            splits = 1
            try:
                assert B >= 64
            except AssertionError:
                splits = 4
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "x.shape",
    ),
    "batch_statistic_as_split_count": (
        """
        def kernel(x, weight, eps):
            B, H = x.shape
            scale = int(x.abs().max())
            splits = 1 + scale % 4
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, triton.cdiv(H, splits), splits, BLOCK_H=256)  # SINK
            return part
        """,
        "work_partitioning",
        "NUM_SPLITS",
        "batch statistic",
    ),
}


@pytest.mark.parametrize("name", sorted(VIOLATING))
def test_violating_flow_is_caught(tmp_path: Path, name: str) -> None:
    body, mechanism, protected, source = VIOLATING[name]
    violations, _, sink = analyze(tmp_path, body)
    hits = [f for f in violations if f.mechanism == mechanism and f.protected == protected]
    assert hits, (
        f"{name}: expected {mechanism}/{protected}, got {[(f.mechanism, f.protected) for f in violations]}"
    )
    f = hits[0]
    assert f.line == sink, f"{name}: reported line {f.line}, sink is line {sink}"
    assert source in f.path[0], f"{name}: path starts at {f.path[0]!r}"
    assert f.guidance and f.file.endswith("cand.py")
    assert all(step.startswith(("line ", "…")) for step in f.path), f.path


HARMLESS = {
    "batch_in_grid_and_allocation": """
        def kernel(x, weight, eps):
            B, H = x.shape
            y = torch.empty((B, H), dtype=x.dtype, device=x.device)
            _row[(B,)](x, weight, y, H, eps, BLOCK_H=min(triton.next_power_of_2(H), 1024), num_warps=4)
            return y
        """,
    "empty_batch_early_exit": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            if x.shape[0] == 0:
                return y
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
    "shape_checks": """
        def kernel(x, weight, eps):
            assert x.shape[1] == weight.shape[0]
            if x.shape[0] > 2**31:
                raise ValueError("too many rows")
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
    "loop_over_samples": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            for i in range(x.shape[0]):
                _row[(1,)](x[i], weight, y[i], x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
    "num_stages_and_grid_cap_from_batch": """
        def kernel(x, weight, eps):
            B = x.shape[0]
            grid = (min(B, 65535),) if B > 65535 else (B,)
            y = torch.empty_like(x)
            _row[grid](x, weight, y, x.shape[1], eps, BLOCK_H=1024, num_stages=2 if B > 64 else 1)
            return y
        """,
    "splits_from_hidden_only": """
        SPLIT = 512

        def kernel(x, weight, eps):
            B, H = x.shape
            splits = triton.cdiv(H, SPLIT)
            part = torch.empty((B, splits), device=x.device)
            _partial[(B, splits)](x, part, H, SPLIT, splits, BLOCK_H=256)
            return part
        """,
    "tile_doubled_up_to_the_hidden_size": """
        def kernel(x, weight, eps):
            B, H = x.shape
            blk = 16
            while blk < H and blk < 1024:
                blk *= 2
            y = torch.empty_like(x)
            _row[(B,)](x, weight, y, H, eps, BLOCK_H=blk)
            return y
        """,
    "fixed_size_batch_chunks_in_a_while_loop": """
        CHUNK = 4096

        def kernel(x, weight, eps):
            B, H = x.shape
            y = torch.empty_like(x)
            row = 0
            while row < B:
                n = min(CHUNK, B - row)
                _row[(n,)](x[row : row + n], weight, y[row : row + n], H, eps, BLOCK_H=1024)
                row += n
            return y
        """,
    "helper_with_a_shape_check_called_outside_try": """
        def _check(x):
            if x.shape[0] > 2**31:
                raise ValueError("too many rows")

        def kernel(x, weight, eps):
            B, H = x.shape
            _check(x)
            y = torch.empty_like(x)
            _row[(B,)](x, weight, y, H, eps, BLOCK_H=1024)
            return y
        """,
    "shape_check_in_try_reraised": """
        def kernel(x, weight, eps):
            B, H = x.shape
            try:
                if B > 2**31:
                    raise ValueError("too many rows")
            except ValueError:
                raise
            y = torch.empty_like(x)
            _row[(B,)](x, weight, y, H, eps, BLOCK_H=1024)
            return y
        """,
    "launch_only_for_a_nonempty_batch": """
        def kernel(x, weight, eps):
            B, H = x.shape
            y = torch.empty_like(x)
            if B:
                _row[(B,)](x, weight, y, H, eps, BLOCK_H=1024)
            return y
        """,
    "launch_only_when_there_are_elements": """
        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            if x.numel() > 0:
                _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y
        """,
    "per_sample_tensor_data": """
        def kernel(x, weight, eps):
            norms = x.float().pow(2).mean(dim=-1)
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=1024)
            return y * 0 + y if norms.shape[0] else y
        """,
}


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_harmless_look_alike_passes(tmp_path: Path, name: str) -> None:
    violations, _, _ = analyze(tmp_path, HARMLESS[name])
    assert violations == [], f"{name}: {[(f.rule, f.line, f.message) for f in violations]}"


def test_flow_through_helper_module_in_the_candidate_folder(tmp_path: Path) -> None:
    helper = """
        def tile_for(rows):
            return 128 if rows < 32 else 1024
    """
    body = """
        from tiles import tile_for

        def kernel(x, weight, eps):
            y = torch.empty_like(x)
            _row[(x.shape[0],)](x, weight, y, x.shape[1], eps, BLOCK_H=tile_for(x.shape[0]))  # SINK
            return y
    """
    violations, _, sink = analyze(tmp_path, body, files={"tiles.py": helper})
    f = next(f for f in violations if f.protected == "BLOCK_H")
    assert f.line == sink
    assert any(step.startswith("tiles.py line 3:") for step in f.path), f.path


def test_dataclass_config_carries_the_batch(tmp_path: Path) -> None:
    body = """
        from dataclasses import dataclass

        @dataclass
        class Config:
            num_splits: int
            block: int

        def kernel(x, weight, eps):
            cfg = Config(max(1, 64 // x.shape[0]), 256)  # SINK
            part = torch.empty((x.shape[0], cfg.num_splits), device=x.device)
            _partial[(x.shape[0], cfg.num_splits)](x, part, x.shape[1], 64, cfg.num_splits, BLOCK_H=cfg.block)
            return part
    """
    violations, _, sink = analyze(tmp_path, body)
    f = next(f for f in violations if f.protected == "NUM_SPLITS")
    assert f.mechanism == "work_partitioning" and sink is not None


def test_opaque_dispatch_is_unresolved_not_rejected(tmp_path: Path) -> None:
    body = """
        import importlib

        def kernel(x, weight, eps):
            impl = importlib.import_module("norm_impl_" + str(weight.shape[0] % 3))
            return impl.run(x, weight, eps)
    """
    violations, unresolved, _ = analyze(tmp_path, body)
    assert violations == []
    assert [f.rule for f in unresolved] == ["opaque_dispatch"]
    assert unresolved[0].severity == "unresolved"


def test_exec_is_unresolved(tmp_path: Path) -> None:
    body = """
        def kernel(x, weight, eps):
            scope = {}
            exec("def f(x, w, e): return x", scope)
            return scope["f"](x, weight, eps)
    """
    violations, unresolved, _ = analyze(tmp_path, body)
    assert violations == [] and any(f.rule == "opaque_dispatch" for f in unresolved)


# A batch tensor's ``tolist()``: one Python value per request, in batch order. A loop over it gives
# each request its own value; a fixed index, len, max or sum of it is a batch statistic.
SAMPLING_HEAD = """
import torch


def kernel(logits, temperature, top_k, top_p, seed):
    probs = torch.softmax(logits, dim=-1)
"""
PER_REQUEST_VALUES = {
    "enumerate_own_generators": (
        """
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    for i, s in enumerate(seed.tolist()):
        g = torch.Generator(device=logits.device)
        g.manual_seed(s)
        out[i] = torch.multinomial(probs[i], 1, generator=g)[0]
    return out
""",
        True,
    ),
    "zip_rows_and_seeds": (
        """
    tokens = []
    for row, s in zip(probs, seed.tolist()):
        g = torch.Generator(device=logits.device).manual_seed(int(s))
        tokens.append(torch.multinomial(row, 1, generator=g))
    return torch.cat(tokens)
""",
        True,
    ),
    "first_request_seeds_all": (
        """
    seeds = seed.tolist()
    g = torch.Generator(device=logits.device).manual_seed(seeds[0])
    return torch.multinomial(probs, 1, generator=g)[:, 0]
""",
        False,
    ),
    "largest_seed": (
        """
    g = torch.Generator(device=logits.device).manual_seed(max(seed.tolist()))
    return torch.multinomial(probs, 1, generator=g)[:, 0]
""",
        False,
    ),
    "sum_of_seeds": (
        """
    g = torch.Generator(device=logits.device).manual_seed(sum(seed.tolist()) % 2**62)
    return torch.multinomial(probs, 1, generator=g)[:, 0]
""",
        False,
    ),
    "own_seed_plus_batch_size": (
        """
    out = torch.empty(logits.shape[0], dtype=torch.int64, device=logits.device)
    n = len(seed.tolist())
    for i, s in enumerate(seed.tolist()):
        g = torch.Generator(device=logits.device).manual_seed(s + n)
        out[i] = torch.multinomial(probs[i], 1, generator=g)[0]
    return out
""",
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(PER_REQUEST_VALUES))
def test_tolist_gives_each_request_its_own_value(tmp_path: Path, name: str) -> None:
    body, invariant = PER_REQUEST_VALUES[name]
    path = tmp_path / "cand.py"
    path.write_text(SAMPLING_HEAD + body)
    violations, _ = run_static(path, get_task("sampling"))
    if invariant:
        assert violations == [], f"{name}: {[(f.rule, f.line, f.message) for f in violations]}"
    else:
        assert [f.protected for f in violations] == ["RNG_SEED"], f"{name}: {violations}"
