"""GEMM baseline: ``torch.mm``, which is cuBLAS(Lt) on CUDA and the CPU BLAS elsewhere."""

from __future__ import annotations

import torch

from nodice.measuring.baselines.spec import Baseline

BASELINES: dict[str, tuple[Baseline, ...]] = {
    "gemm": (
        Baseline(
            "cuBLAS (torch.mm)", lambda: torch.mm, "torch", ("cuda",), "torch.mm, cuBLAS's own heuristic"
        ),
        Baseline("torch.mm", lambda: torch.mm, "torch", ("cpu",), "the CPU BLAS torch was built with"),
    ),
}
