"""GEMM candidates (c = a @ b, one row of a is a sample): tile, split-K and GEMV kernels under launch policies."""

# ruff: noqa: E501  (kernel source is kept as written; the generated files are formatted)

from __future__ import annotations

from _common import Candidate, decorated, invariant, module, violating

T = "gemm"

TILE_BODY = """
def _gemm_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * stride_am + (k + ks[None, :]) * stride_ak,
                    mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks[:, None]) * stride_bk + cols[None, :] * stride_bn,
                    mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))
"""
TILE_KERNEL = "@triton.jit\n" + TILE_BODY.lstrip("\n")

TILE_LAUNCH = """
def _launch_tile(a, b, c, block_m, block_n, block_k):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _gemm_tile[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                     BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
"""

SPLITK = """
@triton.jit
def _gemm_partial(a_ptr, b_ptr, p_ptr, M, N, K, k_per_split, stride_am, stride_bk,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    k_lo = split * k_per_split
    for k in range(k_lo, k_lo + k_per_split, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * stride_am + k + ks[None, :], mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks[:, None]) * stride_bk + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    # Partials of split s live in p[s]; a fixed-order pass adds them up.
    tl.store(p_ptr + split * M * N + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _sum_splits(p_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(SPLIT_K):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _split_k_gemm(a, b, split_k, block_m=16, block_n=128, block_k=64):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    k_per_split = triton.cdiv(triton.cdiv(k, split_k), block_k) * block_k
    partials = torch.empty((split_k, m, n), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n), split_k)
    _gemm_partial[grid](a, b, partials, m, n, k, k_per_split, a.stride(0), b.stride(0),
                        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    _sum_splits[(triton.cdiv(m * n, 1024),)](partials, c, m * n, SPLIT_K=split_k, BLOCK=1024)
    return c
"""

GEMV = """
@triton.jit
def _gemv(a_ptr, b_ptr, c_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One row of a against a column block of b, reduced with elementwise products (no MMA).
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + row * K + k + ks, mask=k + ks < K, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.sum(a[:, None] * b.to(tl.float32), axis=0)
    tl.store(c_ptr + row * N + cols, acc.to(c_ptr.dtype.element_ty), mask=cols < N)


def _launch_gemv(a, b, c):
    m, k = a.shape
    n = b.shape[1]
    _gemv[(m, triton.cdiv(n, 128))](a, b, c, n, k, BLOCK_N=128, BLOCK_K=64)
    return c
"""

ALLOC = "c = torch.empty((m, n), dtype=a.dtype, device=a.device)"


def _tiled(doc: str, launcher: str, *extra: str, imports: str = "") -> str:
    return module(doc, TILE_KERNEL, TILE_LAUNCH, *extra, launcher, imports=imports)


def candidates() -> list[Candidate]:
    out: list[Candidate] = []
    V, I = violating, invariant  # noqa: E741

    # ---- work partitioning: split-K ----
    out.append(
        V(
            "split_k_small_m",
            T,
            "work_partitioning",
            "direct",
            "split-K of 4 when M < 8",
            module(
                "Split-K GEMM for skinny inputs; plain tiles otherwise.",
                SPLITK,
                """
            def kernel(a, b):
                split_k = 4 if a.shape[0] < 8 else 1
                return _split_k_gemm(a, b, split_k)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_k_from_tile_count",
            T,
            "work_partitioning",
            "transitive_grid",
            "split-K chosen to fill 8 programs given the output tile count",
            module(
                "Split-K GEMM that tops the grid up to eight programs.",
                SPLITK,
                """
            PROGRAMS = 8

            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                tiles = triton.cdiv(m, 8) * triton.cdiv(n, 128)
                split_k = max(1, min(4, PROGRAMS // tiles))
                return _split_k_gemm(a, b, split_k, block_m=8)
            """,
            ),
        )
    )
    out.append(
        V(
            "split_k_lookup_pow2",
            T,
            "work_partitioning",
            "dict_lookup",
            "split-K from a table keyed by next_power_of_2(M)",
            module(
                "Split-K GEMM with per-bucket split counts.",
                SPLITK,
                """
            _SPLIT_K = {1: 4, 2: 4, 4: 2, 8: 2}

            def kernel(a, b):
                bucket = triton.next_power_of_2(a.shape[0])
                return _split_k_gemm(a, b, _SPLIT_K.get(bucket, 1))
            """,
            ),
        )
    )
    out.append(
        V(
            "split_k_config_dataclass",
            T,
            "work_partitioning",
            "class_attribute",
            "a config dataclass chosen by the first M bound that fits carries split_k",
            module(
                "Split-K GEMM driven by a list of tuned configs.",
                SPLITK,
                """
            @dataclasses.dataclass(frozen=True)
            class GemmConfig:
                max_m: int
                split_k: int
                block_k: int = 64

            _CONFIGS = [GemmConfig(max_m=4, split_k=2), GemmConfig(max_m=1 << 30, split_k=1)]

            def _config_for(m):
                return next(c for c in _CONFIGS if m <= c.max_m)

            def kernel(a, b):
                cfg = _config_for(a.shape[0])
                return _split_k_gemm(a, b, cfg.split_k, block_k=cfg.block_k)
            """,
                imports="import dataclasses",
            ),
        )
    )
    out.append(
        V(
            "split_k_sibling_module",
            T,
            "work_partitioning",
            "helper_module",
            "split-K from a heuristic in a sibling module",
            module(
                "Split-K GEMM using the shared tuning heuristics.",
                SPLITK,
                """
            def kernel(a, b):
                m, k = a.shape
                return _split_k_gemm(a, b, pick_split_k(m, b.shape[1], k))
            """,
                imports="from _gemm_tuning import pick_split_k",
            ),
            helpers={
                "_gemm_tuning.py": (
                    '"""Tuning heuristics shared by the GEMM kernels."""\n\n\n'
                    "def pick_split_k(m: int, n: int, k: int) -> int:\n"
                    "    # Skinny problems leave most programs idle: split the K loop instead.\n"
                    "    if m <= 4 and k >= 256:\n"
                    "        return 2\n"
                    "    return 1\n"
                )
            },
        )
    )
    out.append(
        V(
            "split_k_from_sm_count",
            T,
            "work_partitioning",
            "device_query",
            "split-K from the SM count (8 on CPU) over the number of output tiles",
            module(
                "Split-K GEMM sized to the machine's SM count.",
                SPLITK,
                """
            def _sm_count(device):
                if device.type == "cuda":
                    return torch.cuda.get_device_properties(device).multi_processor_count
                return 8

            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                tiles = triton.cdiv(m, 8) * triton.cdiv(n, 128)
                split_k = max(1, min(8, _sm_count(a.device) // tiles))
                return _split_k_gemm(a, b, split_k, block_m=8)
            """,
            ),
        )
    )

    # ---- reduction order: K tile ----
    out.append(
        V(
            "block_k_from_m",
            T,
            "reduction_order",
            "direct",
            "BLOCK_K 32 for M <= 4, 128 otherwise",
            _tiled(
                "Tiled GEMM; shallow K tiles for tiny M.",
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                block_k = 32 if m <= 4 else 128
                return _launch_tile(a, b, c, 16, 128, block_k)
            """,
            ),
        )
    )
    out.append(
        V(
            "m_bucket_configs_nearest",
            T,
            "reduction_order",
            "dict_nearest_key",
            "tile configs keyed by M bucket, the nearest bucket wins (the fused-kernel config-file pattern)",
            _tiled(
                "Tiled GEMM with tuned configs per M bucket.",
                """
            # Tuned offline for a few token counts; the nearest one is used.
            _CONFIGS = {
                1: {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256},
                8: {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128},
                64: {"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": 64},
            }

            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                cfg = _CONFIGS[min(_CONFIGS, key=lambda bucket: abs(bucket - m))]
                """
                + ALLOC
                + """
                return _launch_tile(a, b, c, cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"])
            """,
            ),
        )
    )
    out.append(
        V(
            "block_k_heuristics",
            T,
            "autotune",
            "triton_heuristics",
            "@triton.heuristics sets BLOCK_K from M",
            module(
                "Tiled GEMM with a heuristic K tile.",
                decorated(
                    """
            @triton.heuristics({"BLOCK_K": lambda args: 64 if args["M"] <= 3 else 128})
            @triton.jit
            """,
                    TILE_BODY,
                ),
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                grid = (triton.cdiv(m, 16), triton.cdiv(n, 128))
                _gemm_tile[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), BLOCK_M=16, BLOCK_N=128)
                return c
            """,
            ),
        )
    )
    out.append(
        V(
            "autotune_pruned_by_m",
            T,
            "autotune",
            "autotune_key_prune",
            "autotune keyed on M; pruning keeps deeper K tiles for larger M",
            module(
                "Autotuned GEMM; configs are pruned by M before timing.",
                """
            def _prune(configs, named_args, **kwargs):
                m = named_args["M"]
                keep = [c for c in configs if (c.kwargs["BLOCK_K"] >= 128) == (m > 6)]
                return keep[:1]
            """,
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": bk}) for bk in (64, 128)],
                key=["M", "N", "K"],
                prune_configs_by={"early_config_prune": _prune},
            )
            @triton.jit
            """,
                    TILE_BODY,
                ),
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
                _gemm_tile[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
                return c
            """,
            ),
        )
    )
    out.append(
        V(
            "autotune_timed_on_m",
            T,
            "autotune",
            "autotune_key_timed",
            "autotune by timing, keyed on M, over configs with different K tiles",
            module(
                "Autotuned GEMM (timed per M).",
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4),
                         triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128}, num_warps=8)],
                key=["M"],
            )
            @triton.jit
            """,
                    TILE_BODY,
                ),
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
                _gemm_tile[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
                return c
            """,
            ),
            observable_on=("cuda",),
        )
    )
    out.append(
        V(
            "dual_accumulators_small_m",
            T,
            "reduction_order",
            "kernel_choice",
            "for M <= 4 the K loop alternates two accumulators (latency hiding), summed at the end",
            module(
                "Tiled GEMM; tiny M interleaves two accumulators over K.",
                TILE_KERNEL,
                TILE_LAUNCH,
                """
            @triton.jit
            def _gemm_two_acc(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
                rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
                cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
                ks = tl.arange(0, BLOCK_K)
                acc0 = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                acc1 = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for k in range(0, K, 2 * BLOCK_K):
                    a0 = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=rows[:, None] < M, other=0.0)
                    b0 = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=cols[None, :] < N, other=0.0)
                    acc0 = tl.dot(a0, b0, acc0)
                    a1 = tl.load(a_ptr + rows[:, None] * K + k + BLOCK_K + ks[None, :], mask=rows[:, None] < M, other=0.0)
                    b1 = tl.load(b_ptr + (k + BLOCK_K + ks[:, None]) * N + cols[None, :], mask=cols[None, :] < N, other=0.0)
                    acc1 = tl.dot(a1, b1, acc1)
                acc = acc0 + acc1
                tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
            """,
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                if m <= 4 and k % 128 == 0:
                    _gemm_two_acc[(triton.cdiv(m, 16), triton.cdiv(n, 128))](a, b, c, m, n, k, BLOCK_M=16, BLOCK_N=128, BLOCK_K=64)
                    return c
                return _launch_tile(a, b, c, 16, 128, 64)
            """,
            ),
        )
    )

    # ---- algorithm selection ----
    out.append(
        V(
            "gemv_small_m",
            T,
            "algorithm_selection",
            "control_dependent",
            "GEMV kernel (elementwise products, no tl.dot) for M <= 2",
            _tiled(
                "GEMM with a GEMV fast path for one or two rows.",
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                if m <= 2:
                    return _launch_gemv(a, b, c)
                return _launch_tile(a, b, c, 16, 128, 64)
            """,
                GEMV,
            ),
        )
    )
    out.append(
        V(
            "gemv_by_numel",
            T,
            "algorithm_selection",
            "numel_threshold",
            "GEMV path while a holds fewer than 6 rows' worth of elements",
            _tiled(
                "GEMM; small activations take the GEMV path.",
                """
            def kernel(a, b):
                k = b.shape[0]
                n = b.shape[1]
                c = torch.empty((a.shape[0], n), dtype=a.dtype, device=a.device)
                if a.numel() < 6 * k:
                    return _launch_gemv(a, b, c)
                return _launch_tile(a, b, c, 16, 128, 64)
            """,
                GEMV,
            ),
        )
    )
    out.append(
        V(
            "tf32_for_large_m",
            T,
            "algorithm_selection",
            "launch_option",
            "TF32 MMA once M reaches 8, IEEE fp32 below (only fp32 inputs feel it, on GPU)",
            module(
                "Tiled GEMM; large fp32 problems use TF32 tensor cores.",
                decorated(
                    "@triton.jit",
                    TILE_BODY.replace(
                        "acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b, acc, input_precision=PRECISION)"
                    ).replace("BLOCK_K: tl.constexpr):", "BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):"),
                ),
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                precision = "tf32" if m >= 8 else "ieee"
                grid = (triton.cdiv(m, 16), triton.cdiv(n, 128))
                _gemm_tile[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), BLOCK_M=16, BLOCK_N=128, BLOCK_K=64, PRECISION=precision)
                return c
            """,
            ),
            observable_on=("cuda",),
        )
    )

    # ---- float atomics ----
    out.append(
        V(
            "split_k_atomic",
            T,
            "atomics",
            "atomic_accumulate",
            "fixed split-K of 4 accumulated with tl.atomic_add into an fp32 buffer",
            module(
                "Split-K GEMM reducing through fp32 atomics.",
                """
            @triton.jit
            def _gemm_atomic(a_ptr, b_ptr, acc_ptr, M, N, K, k_per_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
                rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
                cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
                ks = tl.arange(0, BLOCK_K)
                k_lo = tl.program_id(2) * k_per_split
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for k in range(k_lo, k_lo + k_per_split, BLOCK_K):
                    a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
                    b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
                    acc = tl.dot(a, b, acc)
                tl.atomic_add(acc_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
            """,
                """
            SPLIT_K = 4

            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                acc = torch.zeros((m, n), dtype=torch.float32, device=a.device)
                k_per_split = triton.cdiv(k, SPLIT_K)
                _gemm_atomic[(triton.cdiv(m, 16), triton.cdiv(n, 128), SPLIT_K)](a, b, acc, m, n, k, k_per_split, BLOCK_M=16, BLOCK_N=128, BLOCK_K=64)
                return acc.to(a.dtype)
            """,
            ),
            observable_on=("cuda",),
        )
    )
    out.append(
        V(
            "split_k_atomic_small_m",
            T,
            "atomics",
            "atomic_split_from_batch",
            "atomic split-K only when M < 6; a plain tile kernel otherwise",
            module(
                "GEMM; skinny inputs split K and reduce through atomics.",
                TILE_KERNEL,
                TILE_LAUNCH,
                """
            @triton.jit
            def _gemm_atomic(a_ptr, b_ptr, acc_ptr, M, N, K, k_per_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
                rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
                cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
                ks = tl.arange(0, BLOCK_K)
                k_lo = tl.program_id(2) * k_per_split
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for k in range(k_lo, k_lo + k_per_split, BLOCK_K):
                    a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
                    b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
                    acc = tl.dot(a, b, acc)
                tl.atomic_add(acc_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
            """,
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                if m < 6:
                    acc = torch.zeros((m, n), dtype=torch.float32, device=a.device)
                    _gemm_atomic[(triton.cdiv(m, 16), triton.cdiv(n, 128), 2)](a, b, acc, m, n, k, triton.cdiv(k, 2), BLOCK_M=16, BLOCK_N=128, BLOCK_K=64)
                    return acc.to(a.dtype)
                """
                + ALLOC
                + """
                return _launch_tile(a, b, c, 16, 128, 64)
            """,
            ),
        )
    )

    # ---- harmless ----
    out.append(
        I(
            "fixed_tiles",
            T,
            "batch_in_grid",
            "fixed 16x128x64 tiles; M only sizes the grid",
            _tiled(
                "Tiled GEMM with fixed tiles.",
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                return _launch_tile(a, b, c, 16, 128, 64)
            """,
            ),
        )
    )
    out.append(
        I(
            "block_m_from_m",
            T,
            "row_tile",
            "BLOCK_M grows with M; the K tile (the reduction) is fixed",
            _tiled(
                "Tiled GEMM; taller row tiles for larger M.",
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                block_m = 16 if m <= 16 else 64
                return _launch_tile(a, b, c, block_m, 128, 64)
            """,
            ),
        )
    )
    out.append(
        I(
            "grouped_order_from_m",
            T,
            "swizzle",
            "grouped (L2-friendly) tile order with a group size chosen from M",
            module(
                "Tiled GEMM with a grouped launch order.",
                """
            @triton.jit
            def _gemm_grouped(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
                pid = tl.program_id(0)
                tiles_m = tl.cdiv(M, BLOCK_M)
                tiles_n = tl.cdiv(N, BLOCK_N)
                per_group = GROUP_M * tiles_n
                first_m = (pid // per_group) * GROUP_M
                group_rows = min(tiles_m - first_m, GROUP_M)
                pid_m = first_m + (pid % per_group) % group_rows
                pid_n = (pid % per_group) // group_rows
                rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
                cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
                ks = tl.arange(0, BLOCK_K)
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for k in range(0, K, BLOCK_K):
                    a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
                    b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
                    acc = tl.dot(a, b, acc)
                tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
            """,
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                group_m = 8 if m >= 128 else 2
                grid = (triton.cdiv(m, 16) * triton.cdiv(n, 64),)
                _gemm_grouped[grid](a, b, c, m, n, k, BLOCK_M=16, BLOCK_N=64, BLOCK_K=64, GROUP_M=group_m)
                return c
            """,
            ),
        )
    )
    out.append(
        I(
            "persistent_tiles",
            T,
            "grid_stride",
            "at most four persistent programs stride over the output tiles",
            module(
                "Persistent tiled GEMM.",
                """
            @triton.jit
            def _gemm_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
                tiles_n = tl.cdiv(N, BLOCK_N)
                tiles = tl.cdiv(M, BLOCK_M) * tiles_n
                ks = tl.arange(0, BLOCK_K)
                for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
                    rows = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
                    cols = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
                    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                    for k in range(0, K, BLOCK_K):
                        a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :], mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
                        b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
                        acc = tl.dot(a, b, acc)
                    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
            """,
                """
            MAX_PROGRAMS = 4

            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                tiles = triton.cdiv(m, 16) * triton.cdiv(n, 128)
                _gemm_persistent[(min(tiles, MAX_PROGRAMS),)](a, b, c, m, n, k, BLOCK_M=16, BLOCK_N=128, BLOCK_K=64)
                return c
            """,
            ),
        )
    )
    out.append(
        I(
            "split_k_fixed",
            T,
            "constant_split",
            "split-K of 2 for every M, partials added in a fixed order",
            module(
                "Split-K GEMM with a fixed split.",
                SPLITK,
                """
            SPLIT_K = 2

            def kernel(a, b):
                return _split_k_gemm(a, b, SPLIT_K)
            """,
            ),
        )
    )
    out.append(
        I(
            "split_k_from_k",
            T,
            "constant_split",
            "split-K derived from K alone",
            module(
                "Split-K GEMM with one split per 256 of K.",
                SPLITK,
                """
            def kernel(a, b):
                k = a.shape[1]
                return _split_k_gemm(a, b, max(1, k // 256))
            """,
            ),
        )
    )
    out.append(
        I(
            "chunked_m",
            T,
            "sample_loop",
            "a Python loop launches one tile row (16 rows of a) at a time",
            _tiled(
                "Tiled GEMM launched over 16-row chunks of a.",
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                for lo in range(0, m, 16):
                    _launch_tile(a[lo:lo + 16], b, c[lo:lo + 16], 16, 128, 64)
                return c
            """,
            ),
        )
    )
    out.append(
        I(
            "pad_m_to_tile",
            T,
            "output_alloc_empty_exit",
            "pads M up to a multiple of 16 with zero rows, computes, slices the result",
            _tiled(
                "Tiled GEMM on a padded copy of a.",
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                if m == 0:
                    return a.new_empty((0, n))
                padded = triton.cdiv(m, 16) * 16
                a_pad = torch.zeros((padded, k), dtype=a.dtype, device=a.device)
                a_pad[:m] = a
                c = torch.empty((padded, n), dtype=a.dtype, device=a.device)
                _launch_tile(a_pad, b, c, 16, 128, 64)
                return c[:m].contiguous()
            """,
            ),
        )
    )
    out.append(
        I(
            "logging_and_checks",
            T,
            "unreached_batch_value",
            "M feeds a log line, a FLOP counter and shape asserts only",
            _tiled(
                "Tiled GEMM with launch accounting.",
                """
            _log = logging.getLogger(__name__)
            FLOPS = {"total": 0}

            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                assert b.shape[0] == k, f"inner dimensions differ: {k} vs {b.shape[0]}"
                FLOPS["total"] += 2 * m * n * k
                _log.debug("gemm m=%d n=%d k=%d", m, n, k)
                """
                + ALLOC
                + """
                return _launch_tile(a, b, c, 16, 128, 64)
            """,
                imports="import logging",
            ),
        )
    )
    out.append(
        I(
            "gemv_for_every_m",
            T,
            "batch_in_grid",
            "the GEMV kernel for every M (no path switch)",
            module(
                "Row-wise GEMV used as the GEMM for any M.",
                GEMV,
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                return _launch_gemv(a, b, c)
            """,
            ),
        )
    )
    out.append(
        I(
            "autotune_row_tile_only",
            T,
            "row_tile",
            "autotune keyed on M over configs that differ only in BLOCK_M",
            module(
                "Autotuned GEMM over row-tile heights only.",
                """
            def _prune(configs, named_args, **kwargs):
                m = named_args["M"]
                return [c for c in configs if c.kwargs["BLOCK_M"] >= min(m, 64)][:1]
            """,
                decorated(
                    """
            @triton.autotune(
                configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": 128, "BLOCK_K": 64}) for bm in (16, 32, 64)],
                key=["M"],
                prune_configs_by={"early_config_prune": _prune},
            )
            @triton.jit
            """,
                    TILE_BODY,
                ),
                """
            def kernel(a, b):
                m, k = a.shape
                n = b.shape[1]
                """
                + ALLOC
                + """
                grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
                _gemm_tile[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
                return c
            """,
            ),
        )
    )
    out.append(
        I(
            "tail_rows_same_kernel",
            T,
            "same_math_kernel_choice",
            "full 16-row tiles and the ragged tail are two launches of the same kernel and tiles",
            _tiled(
                "Tiled GEMM; the ragged tail of M gets its own launch.",
                """
            def kernel(a, b):
                m, n = a.shape[0], b.shape[1]
                """
                + ALLOC
                + """
                full = m // 16 * 16
                if full:
                    _launch_tile(a[:full], b, c[:full], 16, 128, 64)
                if full < m:
                    _launch_tile(a[full:], b, c[full:], 16, 128, 64)
                return c
            """,
            ),
        )
    )
    return out
