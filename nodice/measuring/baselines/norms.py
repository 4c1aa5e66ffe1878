"""Normalization baselines: torch's fused RMSNorm and LayerNorm, and Liger's Triton kernels for both (RMSNorm
alone and after a residual add).

Liger runs in its ``llama`` casting mode with offset 0, the configuration of
a Llama/Qwen RMSNorm: the row is upcast to fp32 for the statistics, the
normalised row is cast back to the io dtype before the weight is applied.

quack (``quack-kernels``) runs its CuTe DSL kernels: ``quack.rmsnorm`` and
``layernorm_fwd``, one compiled kernel per row width whose tile and cluster
come from the width alone (its forward configuration never reads the row
count). Its LayerNorm takes fp32 weight and bias: the casts are setup
(``prepare``). It needs nvidia-cutlass-dsl, the CuTe DSL flash-attn-4 needs too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from nodice.measuring.baselines.spec import (
    Baseline,
    BaselineUnavailable,
    Prepared,
    put_cutlass_dsl_on_path,
    require,
)

LIGER = "liger-kernel"
QUACK = "quack-kernels"


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    summed = x + residual
    return F.rms_norm(summed, (summed.shape[-1],), weight, eps), summed


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _liger_functional() -> Any:
    return require("liger_kernel.transformers.functional", LIGER)


def load_liger_rms_norm() -> Callable[..., Any]:
    liger_rms_norm = _liger_functional().liger_rms_norm

    def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        with torch.no_grad():
            y: torch.Tensor = liger_rms_norm(x, weight, eps, offset=0.0, casting_mode="llama")
        return y

    return run


def load_liger_add_rms_norm() -> Callable[..., Any]:
    """Liger's fused add+RMSNorm when the installed version has one, else a torch add and Liger RMSNorm."""
    functional = _liger_functional()
    fused = getattr(functional, "liger_fused_add_rms_norm", None)
    liger_rms_norm = functional.liger_rms_norm

    def run(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            if fused is not None:
                y, summed = fused(x, residual, weight, eps, offset=0.0, casting_mode="llama")
                return y, summed
            summed = x + residual
            return liger_rms_norm(summed, weight, eps, offset=0.0, casting_mode="llama"), summed

    return run


def load_liger_layer_norm() -> Callable[..., Any]:
    liger_layer_norm = _liger_functional().liger_layer_norm

    def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        with torch.no_grad():
            y: torch.Tensor = liger_layer_norm(x, weight, bias, eps)
        return y

    return run


def _quack_rmsnorm_module() -> Any:
    put_cutlass_dsl_on_path()
    module = require("quack.rmsnorm", QUACK)
    if not torch.cuda.is_available():
        raise BaselineUnavailable(f"{QUACK}: its CuTe DSL kernels need a CUDA device")
    return module


def load_quack_rms_norm() -> Callable[..., Any]:
    quack_rmsnorm = _quack_rmsnorm_module().rmsnorm

    def run(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        with torch.no_grad():
            y: torch.Tensor = quack_rmsnorm(x, weight, eps=float(eps))
        return y

    return run


def load_quack_layer_norm() -> Callable[..., Any]:
    return quack_layer_norm(_quack_rmsnorm_module().layernorm_fwd)


def quack_layer_norm(layernorm_fwd: Callable[..., torch.Tensor]) -> Prepared:
    """The ``layernorm`` task's signature over quack's ``layernorm_fwd(x, weight, bias, eps=…)``."""

    def prepare(
        x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
    ) -> Callable[[], torch.Tensor]:
        # quack's LayerNorm takes its affine parameters in fp32 (a model keeps them so once).
        w, b = weight.float(), bias.float()

        def call() -> torch.Tensor:
            with torch.no_grad():
                y: torch.Tensor = layernorm_fwd(x, w, b, eps=float(eps))
            return y

        return call

    return Prepared(prepare, "quack_layer_norm")


_LLAMA_MODE = "casting_mode='llama', offset=0"

BASELINES: dict[str, tuple[Baseline, ...]] = {
    "rmsnorm": (
        Baseline("torch F.rms_norm", lambda: rms_norm, "torch", ("cpu", "cuda"), "F.rms_norm"),
        Baseline("Liger RMSNorm", load_liger_rms_norm, LIGER, note=f"liger_rms_norm, {_LLAMA_MODE}"),
        Baseline(
            "quack RMSNorm",
            load_quack_rms_norm,
            QUACK,
            note="quack.rmsnorm(x, weight, eps) (CuTe DSL; configuration from the row width)",
        ),
    ),
    "layernorm": (
        Baseline("torch F.layer_norm", lambda: layer_norm, "torch", ("cpu", "cuda"), "F.layer_norm"),
        Baseline(
            "Liger LayerNorm",
            load_liger_layer_norm,
            LIGER,
            note="liger_layer_norm (one Triton program per row)",
        ),
        Baseline(
            "quack LayerNorm",
            load_quack_layer_norm,
            QUACK,
            note="quack.rmsnorm.layernorm_fwd (CuTe DSL), weight and bias cast to fp32 in prepare",
        ),
    ),
    "add_rmsnorm": (
        Baseline(
            "torch add + F.rms_norm",
            lambda: add_rms_norm,
            "torch",
            ("cpu", "cuda"),
            "x + residual in the io dtype, then F.rms_norm",
        ),
        Baseline(
            "Liger fused add+RMSNorm",
            load_liger_add_rms_norm,
            LIGER,
            note=(
                f"liger_fused_add_rms_norm (one Triton kernel), {_LLAMA_MODE}; a liger-kernel "
                "without it runs a torch add, then liger_rms_norm"
            ),
        ),
    ),
}
