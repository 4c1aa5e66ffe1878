"""Where a candidate runs: device choice and the CPU (Triton interpreter) set-up."""

from __future__ import annotations

import os

import torch

from nodice.errors import DeviceError

CPU_NOTE = (
    "CPU run: Triton kernels run under TRITON_INTERPRET=1 in float32, then dynamic validation "
    "again in float16 (where a kernel rounds to the storage dtype), because the interpreter "
    "does not compute bf16 (triton-lang/triton#11584); tl.dot is evaluated in float64 and "
    "rounded, so the interpreter's own BLAS cannot fake a violation"
)


def resolve_device(name: str | None) -> torch.device:
    """``cuda`` when available unless told otherwise."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda"):
        raise DeviceError(f"'{name}' (use cpu or cuda)")
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceError("cuda requested but no CUDA device is visible")
    return torch.device(name)


def prepare(device: torch.device) -> None:
    """Make Triton candidates runnable on ``device``. Must run before a candidate is imported."""
    if device.type != "cpu":
        return
    # triton.jit decides at decoration time whether to interpret.
    os.environ["TRITON_INTERPRET"] = "1"
    _install_deterministic_interpreter_dot()


def _install_deterministic_interpreter_dot() -> None:
    """Replace the interpreter's ``tl.dot`` (an OpenBLAS sgemm) with a batch-invariant one.

    OpenBLAS changes its summation order with the block shape, so an invariant
    ``tl.dot`` kernel would show bit differences when a row moves inside a tile.
    Products of fp16/fp32 operands summed in float64 and rounded once are
    independent of the block shape (to within float64 rounding).
    """
    try:
        import numpy as np
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    builder_cls = interpreter.InterpreterBuilder
    if getattr(builder_cls, "_nodice_dot", False):
        return
    original = builder_cls.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):  # type: ignore[no-untyped-def]
        if a.data.dtype.kind != "f" or b.data.dtype.kind != "f" or a.dtype.primitive_bitwidth == 8:
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        exact = np.matmul(a.data.astype(np.float64), b.data.astype(np.float64))
        acc = (exact + d.data.astype(np.float64)).astype(d.data.dtype)
        return interpreter.TensorHandle(acc, d.dtype.scalar)

    builder_cls.create_dot = create_dot
    builder_cls._nodice_dot = True
