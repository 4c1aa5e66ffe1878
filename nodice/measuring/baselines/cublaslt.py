"""cuBLASLt with split-K disabled: the batch-invariant GEMM configuration vLLM runs on Hopper.

vLLM's batch-invariant mode keeps cuBLAS on SM90 and removes its one source of
batch dependence, split-K, by starving it of workspace: it sets
``CUBLASLT_WORKSPACE_SIZE=1`` (and ``CUBLAS_WORKSPACE_CONFIG=:16:8``) before
CUDA starts, so cuBLASLt's heuristic only offers algorithms that need no
workspace. torch reads those variables once per process, so the same setting
cannot be switched on beside the stock ``torch.mm`` baseline in one process.
This baseline asks cuBLASLt the same question directly: the heuristic's first
algorithm for the shape under a zero-byte workspace preference, called through
the cuBLASLt library torch already loaded (``ctypes``, nothing compiled). The
heuristic and the descriptors are setup (``prepare``); the timed call is one
``cublasLtMatmul``. What it chose (tile, split count) is in :func:`chosen`.

Row-major ``c = a @ b`` is the column-major product ``cᵀ = bᵀ aᵀ``: ``b`` is
cuBLASLt's first operand (N×K, leading dimension N), ``a`` its second (K×M,
leading dimension K), ``c`` the result (N×M, leading dimension N).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.measuring.baselines.spec import BaselineUnavailable, Prepared

# cublasLt.h / library_types.h values (stable across CUDA 12 and 13).
CUDA_R_16F = 2
CUDA_R_32F = 0
CUDA_R_16BF = 14
CUBLAS_COMPUTE_32F = 68
CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1
CUBLASLT_ALGO_CONFIG_TILE_ID = 1
CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2
CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3

DATA_TYPES = {torch.bfloat16: CUDA_R_16BF, torch.float16: CUDA_R_16F, torch.float32: CUDA_R_32F}


class HeuristicResult(ctypes.Structure):
    """``cublasLtMatmulHeuristicResult_t``: the algorithm (64 opaque bytes), its workspace, state, waves."""

    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspace_size", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("waves_count", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


def column_major_operands(m: int, k: int, n: int) -> list[tuple[int, int, int]]:
    """(rows, cols, leading dimension) of cuBLASLt's A, B and C/D for row-major ``(M,K) @ (K,N)``."""
    return [(n, k, n), (k, m, k), (n, m, n)]


def library_path(maps: str) -> str | None:
    """The path of the cuBLASLt shared library among a process's mapped files (``/proc/self/maps``)."""
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and Path(parts[5]).name.startswith("libcublasLt.so"):
            return parts[5].strip()
    return None


_lock = threading.Lock()
_library: Any = None
_handles: dict[int, ctypes.c_void_p] = {}


def _lib() -> Any:
    """The cuBLASLt torch loaded (a cuBLAS call first makes torch load it), with its functions typed."""
    global _library
    with _lock:
        if _library is not None:
            return _library
        if not torch.cuda.is_available():
            raise BaselineUnavailable("cuBLASLt needs a CUDA device")
        probe = torch.ones(8, 8, device="cuda", dtype=torch.bfloat16)
        torch.mm(probe, probe)
        torch.cuda.synchronize()
        path = library_path(Path("/proc/self/maps").read_text())
        if path is None:
            raise BaselineUnavailable("torch did not load libcublasLt (no libcublasLt.so mapped)")
        lib = ctypes.CDLL(path)
        p, i32, u64, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64
        signatures: dict[str, list[Any]] = {
            "cublasLtCreate": [ctypes.POINTER(p)],
            "cublasLtMatmulDescCreate": [ctypes.POINTER(p), i32, i32],
            "cublasLtMatrixLayoutCreate": [ctypes.POINTER(p), i32, u64, u64, i64],
            "cublasLtMatmulPreferenceCreate": [ctypes.POINTER(p)],
            "cublasLtMatmulPreferenceSetAttribute": [p, i32, p, ctypes.c_size_t],
            "cublasLtMatmulAlgoGetHeuristic": [
                p,
                p,
                p,
                p,
                p,
                p,
                p,
                i32,
                ctypes.POINTER(HeuristicResult),
                ctypes.POINTER(i32),
            ],
            "cublasLtMatmulAlgoConfigGetAttribute": [
                p,
                i32,
                p,
                ctypes.c_size_t,
                ctypes.POINTER(ctypes.c_size_t),
            ],
            "cublasLtMatmul": [p, p, p, p, p, p, p, p, p, p, p, p, p, p, ctypes.c_size_t, p],
        }
        for name, argtypes in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = i32
        _library = lib
        return lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLASLt {call} returned status {status}")


def _handle(lib: Any, device: int) -> ctypes.c_void_p:
    with _lock:
        if device not in _handles:
            handle = ctypes.c_void_p()
            with torch.cuda.device(device):
                _check(lib.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
            _handles[device] = handle
        return _handles[device]


class _Plan:
    """Descriptors and the heuristic's first zero-workspace algorithm for one shape and dtype."""

    def __init__(self, lib: Any, device: int, m: int, k: int, n: int, dtype: torch.dtype) -> None:
        self.lib = lib
        self.handle = _handle(lib, device)
        data_type = DATA_TYPES[dtype]
        self.desc = ctypes.c_void_p()
        status = lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc), CUBLAS_COMPUTE_32F, CUDA_R_32F)
        _check(status, "MatmulDescCreate")
        self.layouts = []
        for rows, cols, ld in column_major_operands(m, k, n):
            layout = ctypes.c_void_p()
            status = lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), data_type, rows, cols, ld)
            _check(status, "MatrixLayoutCreate")
            self.layouts.append(layout)
        pref = ctypes.c_void_p()
        _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "MatmulPreferenceCreate")
        no_workspace = ctypes.c_uint64(0)
        _check(
            lib.cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctypes.byref(no_workspace), 8
            ),
            "MatmulPreferenceSetAttribute",
        )
        self.result = HeuristicResult()
        found = ctypes.c_int(0)
        a_layout, b_layout, c_layout = self.layouts
        _check(
            lib.cublasLtMatmulAlgoGetHeuristic(
                self.handle,
                self.desc,
                a_layout,
                b_layout,
                c_layout,
                c_layout,
                pref,
                1,
                ctypes.byref(self.result),
                ctypes.byref(found),
            ),
            "MatmulAlgoGetHeuristic",
        )
        if found.value < 1:
            raise RuntimeError(f"cuBLASLt has no zero-workspace algorithm for M={m} K={k} N={n} {dtype}")
        self.alpha = ctypes.c_float(1.0)
        self.beta = ctypes.c_float(0.0)

    def config(self, attribute: int) -> int:
        value = ctypes.c_uint32(0)
        written = ctypes.c_size_t(0)
        _check(
            self.lib.cublasLtMatmulAlgoConfigGetAttribute(
                ctypes.byref(self.result.algo), attribute, ctypes.byref(value), 4, ctypes.byref(written)
            ),
            "MatmulAlgoConfigGetAttribute",
        )
        return int(value.value)

    def run(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        a_layout, b_layout, c_layout = self.layouts
        stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream)
        _check(
            self.lib.cublasLtMatmul(
                self.handle,
                self.desc,
                ctypes.byref(self.alpha),
                ctypes.c_void_p(b.data_ptr()),
                a_layout,
                ctypes.c_void_p(a.data_ptr()),
                b_layout,
                ctypes.byref(self.beta),
                ctypes.c_void_p(c.data_ptr()),
                c_layout,
                ctypes.c_void_p(c.data_ptr()),
                c_layout,
                ctypes.byref(self.result.algo),
                None,
                0,
                stream,
            ),
            "Matmul",
        )


_plans: dict[tuple[int, int, int, int, torch.dtype], _Plan] = {}


def plan(a: torch.Tensor, b: torch.Tensor) -> _Plan:
    """The cached plan of ``a @ b`` (row-major, contiguous, one dtype)."""
    if a.dtype != b.dtype or a.dtype not in DATA_TYPES:
        raise TypeError(
            f"cuBLASLt baseline: bf16, fp16 or fp32 operands of one dtype, not {a.dtype}/{b.dtype}"
        )
    (m, k), (_, n) = a.shape, b.shape
    device = a.device.index if a.device.index is not None else torch.cuda.current_device()
    key = (device, m, k, n, a.dtype)
    if key not in _plans:
        _plans[key] = _Plan(_lib(), device, m, k, n, a.dtype)
    return _plans[key]


def chosen(a: torch.Tensor, b: torch.Tensor) -> dict[str, int]:
    """The algorithm the heuristic gave ``a @ b``: its tile id, split-K count and reduction scheme."""
    p = plan(a, b)
    return {
        "tile_id": p.config(CUBLASLT_ALGO_CONFIG_TILE_ID),
        "splitk_num": p.config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
        "reduction_scheme": p.config(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
    }


def load_no_split_k() -> Callable[..., Any]:
    _lib()

    def prepare(a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        a, b = a.contiguous(), b.contiguous()
        p = plan(a, b)
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)

        def call() -> torch.Tensor:
            p.run(a, b, c)
            return c

        return call

    return Prepared(prepare, "cublaslt_no_split_k", (torch.bfloat16, torch.float16, torch.float32))
