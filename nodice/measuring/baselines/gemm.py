"""GEMM baselines: ``torch.mm`` (cuBLAS(Lt) on CUDA, the CPU BLAS elsewhere) and two batch-invariant ones.

- cuBLASLt with split-K disabled, vLLM's batch-invariant setting on Hopper (:mod:`.cublaslt`).
- ``sgemm-bi`` (PyPI), a deterministic CUDA GEMM that promises a forward strictly batch-invariant
  across M on its tensor-core tier (``tensor_cores=True``: ``mma.sync``, fp32 accumulation,
  kernels compiled by NVRTC when its engine starts). It takes the weight as ``[K, N]``, the
  task's ``b``, so the call is the task's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nodice.measuring.baselines.cublaslt import load_no_split_k
from nodice.measuring.baselines.spec import Baseline, Prepared, require

SGEMM_BI = "sgemm-bi"


def load_sgemm_bi() -> Callable[..., Any]:
    deterministic_linear = require("sgemm_bi", SGEMM_BI).deterministic_linear

    def prepare(a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
        a, b = a.contiguous(), b.contiguous()

        def call() -> torch.Tensor:
            with torch.no_grad():
                c: torch.Tensor = deterministic_linear(a, b, None, tensor_cores=True)
            return c

        return call

    return Prepared(prepare, "sgemm_bi", (torch.bfloat16, torch.float16))


BASELINES: dict[str, tuple[Baseline, ...]] = {
    "gemm": (
        Baseline(
            "cuBLAS (torch.mm)", lambda: torch.mm, "torch", ("cuda",), "torch.mm, cuBLAS's own heuristic"
        ),
        Baseline(
            "cuBLASLt, no split-K",
            load_no_split_k,
            "torch",
            note=(
                "cuBLASLt's first heuristic algorithm under a zero-byte workspace: split-K off, "
                "as vLLM's CUBLASLT_WORKSPACE_SIZE=1 has it on Hopper"
            ),
        ),
        Baseline(
            "sgemm-bi",
            load_sgemm_bi,
            SGEMM_BI,
            note=(
                "sgemm_bi.deterministic_linear(a, b, tensor_cores=True), its batch-invariant tensor-core tier"
            ),
        ),
        Baseline("torch.mm", lambda: torch.mm, "torch", ("cpu",), "the CPU BLAS torch was built with"),
    ),
}
