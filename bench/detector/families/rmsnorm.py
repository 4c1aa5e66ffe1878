"""RMSNorm candidates: one Triton row kernel (or a split-row pair) under many launch policies."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, decorated, invariant, module, violating

T = "rmsnorm"

ROW_KERNEL = """
@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
"""

# The same row kernel with the row count as an argument, for heuristics and autotuning to key on.
ROWS_ARG_BODY = """
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
"""

SPLIT_KERNELS = """
@triton.jit
def _partial_sumsq(x_ptr, part_ptr, hidden, chunk, num_splits, BLOCK_H: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    offs = tl.arange(0, BLOCK_H)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    lo = split * chunk
    for start in range(lo, lo + chunk, BLOCK_H):
        mask = (start + offs < hidden) & (start + offs < lo + chunk)
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(part_ptr + row * num_splits + split, tl.sum(acc, axis=0))


@triton.jit
def _normalize(x_ptr, w_ptr, part_ptr, y_ptr, hidden, eps, num_splits, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr):
    row = tl.program_id(0)
    s_offs = tl.arange(0, BLOCK_S)
    parts = tl.load(part_ptr + row * num_splits + s_offs, mask=s_offs < num_splits, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(parts, axis=0) / hidden + eps)
    offs = tl.arange(0, BLOCK_H)
    for start in range(0, hidden, BLOCK_H):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _split_rmsnorm(x, weight, eps, num_splits):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    chunk = triton.cdiv(hidden, num_splits)
    partials = torch.empty((batch, num_splits), dtype=torch.float32, device=x.device)
    # Each split program walks its chunk 128 channels at a time.
    _partial_sumsq[(batch, num_splits)](x, partials, hidden, chunk, num_splits, BLOCK_H=128)
    _normalize[(batch,)](
        x, weight, partials, y, hidden, eps, num_splits,
        BLOCK_H=min(triton.next_power_of_2(hidden), 1024), BLOCK_S=triton.next_power_of_2(num_splits),
    )
    return y
"""

MULTIROW_KERNEL = """
@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = tl.arange(0, BLOCK_H)
    row_ok = rows < n_rows
    acc = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_H):
        mask = row_ok[:, None] & (start + offs[None, :] < hidden)
        x = tl.load(x_ptr + rows[:, None] * hidden + start + offs[None, :], mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / hidden + eps)
    for start in range(0, hidden, BLOCK_H):
        mask = row_ok[:, None] & (start + offs[None, :] < hidden)
        ptrs = rows[:, None] * hidden + start + offs[None, :]
        x = tl.load(x_ptr + ptrs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=start + offs < hidden, other=0.0).to(tl.float32)
        tl.store(y_ptr + ptrs, (x * rstd[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)
"""

PERSISTENT_KERNEL = """
@triton.jit
def _rmsnorm_persistent(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, BLOCK_H: tl.constexpr):
    # Each program walks rows pid, pid + programs, ...: the grid is capped, the work per row is not.
    offs = tl.arange(0, BLOCK_H)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        acc = tl.zeros([BLOCK_H], dtype=tl.float32)
        for start in range(0, hidden, BLOCK_H):
            mask = start + offs < hidden
            x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
        for start in range(0, hidden, BLOCK_H):
            mask = start + offs < hidden
            x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
"""

TORCH_PATH = """
def _rmsnorm_torch(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
"""

ROW_LAUNCH = "_rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H={block}, num_warps={warps})"


def _row(doc: str, launcher: str, *extra: str, imports: str = "") -> str:
    return module(doc, ROW_KERNEL, *extra, launcher, imports=imports)


def _split(doc: str, launcher: str, *extra: str, imports: str = "") -> str:
    return module(doc, SPLIT_KERNELS, *extra, launcher, imports=imports)


def candidates() -> list[Candidate]:
    out: list[Candidate] = []
    V, I = violating, invariant  # noqa: E741

    # ---- work partitioning: how many programs share one row's sum of squares ----
    out.append(
        V(
            "split_count_from_batch",
            T,
            "work_partitioning",
            "direct",
            "split count = target programs // batch",
            _split(
                "RMSNorm with the row reduction spread over enough programs to fill the machine.",
                """
            TARGET_PROGRAMS = 16

            def kernel(x, weight, eps):
                batch = x.shape[0]
                num_splits = max(1, min(8, TARGET_PROGRAMS // batch))
                return _split_rmsnorm(x, weight, eps, num_splits)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_helper_function",
            T,
            "work_partitioning",
            "function_return",
            "split count computed by a helper from the row count",
            _split(
                "Split-row RMSNorm; the split heuristic lives in its own function.",
                """
            def _choose_splits(rows, max_splits=8, programs=16):
                # Few rows leave programs idle: give each row more of them.
                return max(1, min(max_splits, programs // max(rows, 1)))

            def kernel(x, weight, eps):
                rows, _ = x.shape
                return _split_rmsnorm(x, weight, eps, _choose_splits(rows))
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_table_lookup",
            T,
            "work_partitioning",
            "dict_lookup",
            "split count looked up in a table keyed by batch size",
            _split(
                "Split-row RMSNorm with tuned split counts for decode batch sizes.",
                """
            _SPLITS_BY_BATCH = {1: 8, 2: 8, 3: 4, 4: 4, 5: 2, 6: 2}

            def kernel(x, weight, eps):
                num_splits = _SPLITS_BY_BATCH.get(x.size(0), 1)
                return _split_rmsnorm(x, weight, eps, num_splits)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_plan_class",
            T,
            "work_partitioning",
            "class_attribute",
            "split count held in a launch-plan object built from the input",
            _split(
                "Split-row RMSNorm driven by a small launch plan.",
                """
            class LaunchPlan:
                def __init__(self, rows, hidden):
                    self.rows = rows
                    self.hidden = hidden
                    self.num_splits = 4 if rows < 6 else 1

                @classmethod
                def for_input(cls, x):
                    return cls(x.shape[0], x.shape[1])

            def kernel(x, weight, eps):
                plan = LaunchPlan.for_input(x)
                return _split_rmsnorm(x, weight, eps, plan.num_splits)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_from_numel",
            T,
            "work_partitioning",
            "numel_division",
            "rows recovered as numel // hidden, split when few",
            _split(
                "Split-row RMSNorm for flattened token batches.",
                """
            def kernel(x, weight, eps):
                tokens = x.numel() // x.shape[-1]
                num_splits = 4 if tokens < 8 else 1
                return _split_rmsnorm(x, weight, eps, num_splits)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_control_flow",
            T,
            "work_partitioning",
            "control_dependent",
            "split count assigned in branches of a batch-size test",
            _split(
                "Split-row RMSNorm; small batches split each row in two.",
                """
            def kernel(x, weight, eps):
                num_splits = 1
                if len(x) <= 4:
                    num_splits = 2
                return _split_rmsnorm(x, weight, eps, num_splits)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_config_kwargs",
            T,
            "work_partitioning",
            "container_kwargs",
            "split count passed through a config dict as keyword arguments",
            _split(
                "Split-row RMSNorm configured through a dict of launch options.",
                """
            def _launch(x, weight, eps, num_splits=1, **_):
                return _split_rmsnorm(x, weight, eps, num_splits)

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                config = {"num_splits": 1, "hidden": hidden}
                if batch * 4 <= 16:
                    config["num_splits"] = 4
                return _launch(x, weight, eps, **config)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_count_sibling_module",
            T,
            "work_partitioning",
            "helper_module",
            "split count from a heuristic in a sibling module",
            _split(
                "Split-row RMSNorm using the shared occupancy heuristic.",
                """
            def kernel(x, weight, eps):
                return _split_rmsnorm(x, weight, eps, splits_for_rows(x.shape[0]))
            """,
                imports="from _rmsnorm_occupancy import splits_for_rows",
            ),
            helpers={
                "_rmsnorm_occupancy.py": (
                    '"""Occupancy heuristics shared by the RMSNorm kernels."""\n\n'
                    "PROGRAMS = 12\n\n\n"
                    "def splits_for_rows(rows: int) -> int:\n"
                    "    # Enough programs per row to occupy PROGRAMS slots, at most 4.\n"
                    "    return max(1, min(4, PROGRAMS // max(rows, 1)))\n"
                )
            },
        )
    )
    out.append(
        V(
            "split_count_from_grid_size",
            T,
            "work_partitioning",
            "transitive_grid",
            "split count from how many row programs the grid already has",
            _split(
                "Split-row RMSNorm that tops the grid up to a fixed number of programs.",
                """
            ROWS_PER_PROGRAM = 2
            WAVE = 8

            def kernel(x, weight, eps):
                row_programs = triton.cdiv(x.shape[0], ROWS_PER_PROGRAM)
                num_splits = max(1, WAVE // row_programs)
                return _split_rmsnorm(x, weight, eps, num_splits)
            """,
            ),
        )
    )

    # ---- reduction order: the tile of the reduced axis depends on the batch ----
    out.append(
        V(
            "tile_from_batch",
            T,
            "reduction_order",
            "direct",
            "reduction tile narrower for small batches",
            _row(
                "RMSNorm, one program per row; narrow tiles for small batches.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                block_h = 256 if batch < 8 else min(triton.next_power_of_2(hidden), 1024)
                """
                + ROW_LAUNCH.format(block="block_h", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "tile_scaled_by_batch",
            T,
            "reduction_order",
            "arithmetic",
            "reduction tile = 1024 // next_pow2(batch), at least 128",
            _row(
                "RMSNorm, one program per row; the tile shrinks as the batch grows.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                block_h = max(128, 1024 // triton.next_power_of_2(batch))
                """
                + ROW_LAUNCH.format(block="block_h", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "tile_from_token_bytes",
            T,
            "reduction_order",
            "numel_threshold",
            "reduction tile chosen from the input's size in bytes",
            _row(
                "RMSNorm, one program per row; the tile follows the input size.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                nbytes = x.numel() * x.element_size()
                block_h = 512 if nbytes < 6 * 4096 else 1024
                """
                + ROW_LAUNCH.format(block="block_h", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "tile_heuristics_on_rows",
            T,
            "autotune",
            "triton_heuristics",
            "@triton.heuristics picks the reduction tile from n_rows",
            module(
                "RMSNorm whose tile is chosen by a Triton heuristic.",
                decorated(
                    """
            @triton.heuristics({"BLOCK_H": lambda args: 256 if args["n_rows"] < 4 else 1024})
            @triton.jit
            """,
                    ROWS_ARG_BODY,
                ),
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                _rmsnorm_row[(batch,)](x, weight, y, batch, hidden, eps)
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "autotune_pruned_by_rows",
            T,
            "autotune",
            "autotune_key_prune",
            "autotune keyed on n_rows; the pruning hook keeps a narrow tile for small batches",
            module(
                "Autotuned RMSNorm; small batches only consider the narrow tile.",
                """
            def _prune(configs, named_args, **kwargs):
                narrow = named_args["n_rows"] < 8
                return [c for c in configs if (c.kwargs["BLOCK_H"] < 1024) == narrow][:1]
            """,
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_H": 256}, num_warps=2), triton.Config({"BLOCK_H": 1024}, num_warps=4)],
                key=["n_rows", "hidden"],
                prune_configs_by={"early_config_prune": _prune},
            )
            @triton.jit
            """,
                    ROWS_ARG_BODY,
                ),
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                _rmsnorm_row[(batch,)](x, weight, y, batch, hidden, eps)
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "autotune_perf_model_rows",
            T,
            "autotune",
            "autotune_perf_model",
            "autotune keyed on n_rows; a performance model picks the top config per row count",
            module(
                "Autotuned RMSNorm ranked by a simple performance model.",
                """
            def _estimate(n_rows, hidden, BLOCK_H, **kwargs):
                # Programs are cheap when there are few rows; wide tiles win once there are many.
                return n_rows * hidden / BLOCK_H + (8.0 if BLOCK_H > 256 and n_rows < 6 else 0.0)
            """,
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_H": 256}), triton.Config({"BLOCK_H": 1024})],
                key=["n_rows"],
                prune_configs_by={"perf_model": _estimate, "top_k": 1},
            )
            @triton.jit
            """,
                    ROWS_ARG_BODY,
                ),
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                _rmsnorm_row[(batch,)](x, weight, y, batch, hidden, eps)
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "autotune_timed_on_rows",
            T,
            "autotune",
            "autotune_key_timed",
            "autotune by timing, keyed on n_rows, over tiles of the reduced axis",
            module(
                "Autotuned RMSNorm (benchmarked configs, re-tuned per row count).",
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_H": 256}, num_warps=2), triton.Config({"BLOCK_H": 1024}, num_warps=8)],
                key=["n_rows"],
            )
            @triton.jit
            """,
                    ROWS_ARG_BODY,
                ),
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                _rmsnorm_row[(batch,)](x, weight, y, batch, hidden, eps)
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "num_warps_from_batch",
            T,
            "reduction_order",
            "launch_option",
            "same tile, but num_warps from the batch size: the in-block tree reduction changes on GPU",
            _row(
                "RMSNorm, one program per row; fewer warps for small batches.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                warps = 2 if batch < 8 else 8
                """
                + ROW_LAUNCH.format(block="1024", warps="warps")
                + """
                return y
            """,
            ),
            observable_on=("cuda",),
        )
    )

    # ---- algorithm selection: a different path for some batch sizes ----
    out.append(
        V(
            "torch_path_small_batch",
            T,
            "algorithm_selection",
            "control_dependent",
            "eager PyTorch path for batches of at most 4 rows",
            _row(
                "RMSNorm: eager PyTorch for decode-sized batches, Triton otherwise.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                if batch <= 4:
                    return _rmsnorm_torch(x, weight, eps)
                y = torch.empty_like(x)
                """
                + ROW_LAUNCH.format(block="256", warps=4)
                + """
                return y
            """,
                TORCH_PATH,
            ),
        )
    )
    out.append(
        V(
            "torch_path_large_batch",
            T,
            "algorithm_selection",
            "control_dependent",
            "vectorised PyTorch path once the batch reaches 8 rows",
            _row(
                "RMSNorm: Triton for small batches, one vectorised PyTorch expression for large ones.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                if batch >= 8:
                    return _rmsnorm_torch(x, weight, eps)
                y = torch.empty_like(x)
                """
                + ROW_LAUNCH.format(block="1024", warps=4)
                + """
                return y
            """,
                TORCH_PATH,
            ),
        )
    )
    out.append(
        V(
            "split_path_small_batch",
            T,
            "algorithm_selection",
            "kernel_choice",
            "split-row kernels for batches under 4, the row kernel otherwise",
            module(
                "RMSNorm with a split-row path for tiny batches.",
                ROW_KERNEL,
                SPLIT_KERNELS,
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                if batch < 4:
                    return _split_rmsnorm(x, weight, eps, 4)
                y = torch.empty_like(x)
                """
                + ROW_LAUNCH.format(block="1024", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "tail_rows_in_torch",
            T,
            "algorithm_selection",
            "position_dependent",
            "full groups of 4 rows in Triton, the leftover rows in PyTorch",
            module(
                "RMSNorm over groups of four rows; the ragged tail is finished in PyTorch.",
                MULTIROW_KERNEL,
                TORCH_PATH,
                """
            GROUP = 4

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                full = batch // GROUP * GROUP
                if full:
                    _rmsnorm_rows[(full // GROUP,)](x, weight, y, full, hidden, eps, BLOCK_M=GROUP, BLOCK_H=256)
                if full < batch:
                    y[full:] = _rmsnorm_torch(x[full:], weight, eps)
                return y
            """,
            ),
        )
    )
    out.append(
        V(
            "sumsq_by_matmul",
            T,
            "algorithm_selection",
            "control_dependent",
            "from 6 rows on, the sums of squares come from one matrix product",
            _row(
                "RMSNorm; large batches get their sums of squares from a single GEMV.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                if batch >= 6:
                    xf = x.float()
                    sumsq = (xf * xf) @ torch.ones(hidden, dtype=torch.float32, device=x.device)
                    rstd = torch.rsqrt(sumsq / hidden + eps)
                    return (xf * rstd[:, None] * weight.float()).to(x.dtype)
                y = torch.empty_like(x)
                """
                + ROW_LAUNCH.format(block="1024", warps=4)
                + """
                return y
            """,
            ),
        )
    )

    # ---- float atomics ----
    out.append(
        V(
            "atomic_partial_sums",
            T,
            "atomics",
            "atomic_accumulate",
            "four programs per row add their partial sums of squares with tl.atomic_add",
            module(
                "RMSNorm whose split programs accumulate into one fp32 sum per row.",
                """
            @triton.jit
            def _sumsq_atomic(x_ptr, sumsq_ptr, hidden, CHUNK: tl.constexpr):
                row = tl.program_id(0)
                split = tl.program_id(1)
                offs = split * CHUNK + tl.arange(0, CHUNK)
                x = tl.load(x_ptr + row * hidden + offs, mask=offs < hidden, other=0.0).to(tl.float32)
                tl.atomic_add(sumsq_ptr + row, tl.sum(x * x, axis=0))


            @triton.jit
            def _scale(x_ptr, w_ptr, sumsq_ptr, y_ptr, hidden, eps, BLOCK_H: tl.constexpr):
                row = tl.program_id(0)
                rstd = 1.0 / tl.sqrt(tl.load(sumsq_ptr + row) / hidden + eps)
                offs = tl.arange(0, BLOCK_H)
                for start in range(0, hidden, BLOCK_H):
                    mask = start + offs < hidden
                    x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
                    w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                    tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
            """,
                """
            SPLITS = 4

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                sumsq = torch.zeros(batch, dtype=torch.float32, device=x.device)
                chunk = triton.next_power_of_2(triton.cdiv(hidden, SPLITS))
                _sumsq_atomic[(batch, SPLITS)](x, sumsq, hidden, CHUNK=chunk)
                _scale[(batch,)](x, weight, sumsq, y, hidden, eps, BLOCK_H=1024)
                return y
            """,
            ),
            observable_on=("cuda",),
        )
    )

    # ---- harmless uses of the batch size ----
    out.append(
        I(
            "batch_in_grid",
            T,
            "batch_in_grid",
            "the batch size only sizes the grid",
            _row(
                "RMSNorm, one program per row, fixed tile.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                """
                + ROW_LAUNCH.format(block="1024", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "persistent_grid_stride",
            T,
            "grid_stride",
            "a capped persistent grid walks the rows; each row is reduced the same way",
            module(
                "Persistent RMSNorm: at most 4 programs, each striding over rows.",
                PERSISTENT_KERNEL,
                """
            MAX_PROGRAMS = 4

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                programs = min(batch, MAX_PROGRAMS)
                _rmsnorm_persistent[(programs,)](x, weight, y, batch, hidden, eps, BLOCK_H=512)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "output_allocation_and_empty_exit",
            T,
            "output_alloc_empty_exit",
            "allocates the output from the batch size and returns early on an empty batch",
            _row(
                "RMSNorm with an explicit output allocation and an empty-batch shortcut.",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty((batch, hidden), dtype=x.dtype, device=x.device)
                if batch == 0:
                    return y
                """
                + ROW_LAUNCH.format(block="512", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "reversed_row_order",
            T,
            "swizzle",
            "programs visit rows in reverse order (a batch-dependent index remap)",
            module(
                "RMSNorm launching rows last-first, so late rows start early.",
                """
            @triton.jit
            def _rmsnorm_row_rev(x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, BLOCK_H: tl.constexpr):
                row = n_rows - 1 - tl.program_id(0)
                offs = tl.arange(0, BLOCK_H)
                acc = tl.zeros([BLOCK_H], dtype=tl.float32)
                for start in range(0, hidden, BLOCK_H):
                    mask = start + offs < hidden
                    x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
                    acc += x * x
                rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
                for start in range(0, hidden, BLOCK_H):
                    mask = start + offs < hidden
                    x = tl.load(x_ptr + row * hidden + start + offs, mask=mask, other=0.0).to(tl.float32)
                    w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
                    tl.store(y_ptr + row * hidden + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
            """,
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                _rmsnorm_row_rev[(batch,)](x, weight, y, batch, hidden, eps, BLOCK_H=1024)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "loop_over_rows",
            T,
            "sample_loop",
            "a Python loop launches the row kernel once per row",
            _row(
                "RMSNorm launched row by row (a debugging-friendly launcher).",
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                for i in range(batch):
                    _rmsnorm_row[(1,)](x[i], weight, y[i], hidden, eps, BLOCK_H=1024)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "logging_and_asserts",
            T,
            "unreached_batch_value",
            "the batch size feeds a log line, an assert and a statistics counter only",
            _row(
                "RMSNorm with launch logging.",
                """
            _log = logging.getLogger(__name__)
            _launches = {"rows": 0, "calls": 0}

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                assert batch < 2**31 // hidden, "row offsets would overflow int32"
                _log.debug("rmsnorm: %d rows of %d", batch, hidden)
                _launches["rows"] += batch
                _launches["calls"] += 1
                y = torch.empty_like(x)
                """
                + ROW_LAUNCH.format(block="1024", warps=4)
                + """
                return y
            """,
                imports="import logging",
            ),
        )
    )
    out.append(
        I(
            "elementwise_block_from_batch",
            T,
            "unreached_batch_value",
            "two passes: a fixed-tile reduction, then an elementwise scale whose block follows the batch",
            module(
                "Two-pass RMSNorm: per-row rstd, then a flat elementwise scale.",
                """
            @triton.jit
            def _row_rstd(x_ptr, rstd_ptr, hidden, eps, BLOCK_H: tl.constexpr):
                row = tl.program_id(0)
                offs = tl.arange(0, BLOCK_H)
                acc = tl.zeros([BLOCK_H], dtype=tl.float32)
                for start in range(0, hidden, BLOCK_H):
                    x = tl.load(x_ptr + row * hidden + start + offs, mask=start + offs < hidden, other=0.0)
                    acc += x.to(tl.float32) * x.to(tl.float32)
                tl.store(rstd_ptr + row, 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps))


            @triton.jit
            def _apply(x_ptr, w_ptr, rstd_ptr, y_ptr, n, hidden, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                mask = offs < n
                x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + offs % hidden, mask=mask, other=0.0).to(tl.float32)
                r = tl.load(rstd_ptr + offs // hidden, mask=mask, other=0.0)
                tl.store(y_ptr + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)
            """,
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                rstd = torch.empty(batch, dtype=torch.float32, device=x.device)
                _row_rstd[(batch,)](x, rstd, hidden, eps, BLOCK_H=1024)
                # The scale is elementwise: any block size gives the same bits.
                block = 1024 if batch < 4 else 4096
                n = x.numel()
                _apply[(triton.cdiv(n, block),)](x, weight, rstd, y, n, hidden, BLOCK=block, num_warps=4 if batch < 4 else 8)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "constant_split_count",
            T,
            "constant_split",
            "split-row kernels with NUM_SPLITS fixed at 4 for every batch",
            _split(
                "Split-row RMSNorm with a fixed split count.",
                """
            NUM_SPLITS = 4

            def kernel(x, weight, eps):
                return _split_rmsnorm(x, weight, eps, NUM_SPLITS)
            """,
            ),
        )
    )
    out.append(
        I(
            "split_count_from_hidden",
            T,
            "constant_split",
            "split count derived from the hidden size only",
            _split(
                "Split-row RMSNorm with one split per 256 channels.",
                """
            def kernel(x, weight, eps):
                hidden = x.shape[1]
                num_splits = max(1, hidden // 256)
                return _split_rmsnorm(x, weight, eps, num_splits)
            """,
            ),
        )
    )
    out.append(
        I(
            "row_tile_from_batch",
            T,
            "row_tile",
            "rows per program follow the batch; the reduced axis keeps a fixed tile",
            module(
                "Multi-row RMSNorm: up to 8 rows per program.",
                MULTIROW_KERNEL,
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                block_m = min(8, triton.next_power_of_2(batch))
                _rmsnorm_rows[(triton.cdiv(batch, block_m),)](x, weight, y, batch, hidden, eps, BLOCK_M=block_m, BLOCK_H=256)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "autotune_row_tile_only",
            T,
            "row_tile",
            "autotune keyed on n_rows over configs that differ only in rows per program",
            module(
                "Autotuned multi-row RMSNorm (rows per program only).",
                """
            def _prune(configs, named_args, **kwargs):
                rows = named_args["n_rows"]
                return [c for c in configs if c.kwargs["BLOCK_M"] <= max(rows, 1)][-1:] or configs[:1]
            """,
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_M": m, "BLOCK_H": 256}) for m in (1, 2, 4, 8)],
                key=["n_rows"],
                prune_configs_by={"early_config_prune": _prune},
            )
            """,
                    MULTIROW_KERNEL,
                ),
                """
            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                grid = lambda meta: (triton.cdiv(batch, meta["BLOCK_M"]),)
                _rmsnorm_rows[grid](x, weight, y, batch, hidden, eps)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "chunked_launches",
            T,
            "sample_loop",
            "the batch is processed in chunks of 8 rows, one launch per chunk",
            _row(
                "RMSNorm launched over chunks of at most 8 rows.",
                """
            CHUNK = 8

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                for lo in range(0, batch, CHUNK):
                    hi = min(lo + CHUNK, batch)
                    _rmsnorm_row[(hi - lo,)](x[lo:hi], weight, y[lo:hi], hidden, eps, BLOCK_H=1024)
                return y
            """,
            ),
        )
    )
    out.append(
        I(
            "persistent_for_large_batch",
            T,
            "same_math_kernel_choice",
            "large batches take a persistent kernel whose per-row arithmetic equals the row kernel's",
            module(
                "RMSNorm with a persistent launch for large batches.",
                ROW_KERNEL,
                PERSISTENT_KERNEL,
                """
            MAX_PROGRAMS = 4

            def kernel(x, weight, eps):
                batch, hidden = x.shape
                y = torch.empty_like(x)
                if batch > 2 * MAX_PROGRAMS:
                    _rmsnorm_persistent[(MAX_PROGRAMS,)](x, weight, y, batch, hidden, eps, BLOCK_H=1024)
                else:
                    """
                + ROW_LAUNCH.format(block="1024", warps=4)
                + """
                return y
            """,
            ),
        )
    )
    return out
