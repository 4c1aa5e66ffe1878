"""Call an untrusted kernel: poison what it may allocate, catch what it raises, check what it returns."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nodice.errors import KernelCrashError, NodiceError, OutputSpecError, interrupts_are_raised
from nodice.gate import progress
from nodice.gate.result import CheatDetected
from nodice.tasks.base import Output, Task

POISON_COPIES = 4


def poison_allocator(device: torch.device, shapes: list[tuple[torch.Size, torch.dtype]]) -> None:
    """Leave NaN in the memory the kernel's next ``torch.empty`` calls are likely to get.

    The caching allocator (and malloc for small blocks) hands freed blocks back
    for the same sizes, so an output element the kernel never writes reads NaN
    instead of a previous run's correct answer.
    """
    blocks = []
    # Several blocks per output: every recently freed block of that size (not just the last one)
    # is handed out, poisoned, and freed again.
    # ``torch.full`` is ``empty`` and ``fill_`` in one call: the same block and one launch, but one
    # dispatch from Python instead of two (this runs before every kernel call the gate makes).
    for shape, dtype in shapes:
        poison = float("nan") if dtype.is_floating_point else -1
        blocks += [torch.full(shape, poison, dtype=dtype, device=device) for _ in range(POISON_COPIES)]
    del blocks


def _jit_error_line(exc: BaseException, candidate: Path) -> int | None:
    """The candidate's file line of a Triton compilation error. Its message is ``at L:C:``, an
    excerpt of the kernel's source ending at the failing line, a caret line and the reason; Triton
    counts L from the ``@triton.jit`` function's ``def``: the failing line is found where it sits
    L - 1 lines below a ``def``."""
    rel = getattr(getattr(exc, "node", None), "lineno", None)
    lines = str(exc).splitlines()
    carets = [i for i, line in enumerate(lines) if line.strip() == "^"]
    if not isinstance(rel, int) or rel < 1 or not carets or carets[-1] < 1:
        return None
    text = lines[carets[-1] - 1].strip()
    try:
        source = candidate.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(source):
        head = i - (rel - 1)
        if text and line.strip() == text and head >= 0 and source[head].lstrip().startswith("def "):
            return i + 1
    return None


def describe_exception(exc: BaseException, candidate: Path | None, limit: int | None = None) -> str:
    """One line for an exception the candidate raised: its type, where in the candidate file, and
    the message. A Triton compilation error names the kernel's own line and the compiler's reason
    (its message is a source excerpt first, the reason last). Notes added to the exception on its way
    out (the harness's own context, ``BaseException.add_note``) follow; ``limit`` shortens the rest
    so that they survive."""
    where = ""
    if candidate is not None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == candidate]
        line = _jit_error_line(exc, candidate)
        if line is not None:
            where = f" at {candidate.name}:{line}"
            if frames:
                where += f" (launched at line {frames[-1].lineno})"
        elif frames:
            where = f" at {candidate.name}:{frames[-1].lineno}"
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    reason = getattr(exc, "error_message", None)
    msg = " ".join(str(reason).split()) if reason else first
    described = f"{type(exc).__name__}{where}" + (f": {msg}" if msg else "")
    notes = "".join(f": {' '.join(str(n).split())}" for n in getattr(exc, "__notes__", ()) if str(n).strip())
    if limit is not None:
        described = described[: max(0, limit - len(notes))]
    return described + notes


def call_kernel(fn: Callable[..., Any], args: tuple[Any, ...], candidate: Path) -> Any:
    progress.step()
    try:
        out = fn(*args)
        if args and isinstance(args[0], torch.Tensor) and args[0].is_cuda:
            torch.cuda.synchronize()
        return out
    except SystemExit as exc:
        raise KernelCrashError(f"kernel called exit({exc.code})") from None
    except KeyboardInterrupt as exc:
        if not interrupts_are_raised():
            raise  # the user's Ctrl-C (--no-sandbox)
        raise KernelCrashError(describe_exception(exc, candidate, limit=400)) from None
    except (NodiceError, CheatDetected):
        raise  # the harness's own verdicts (bad output, a guard's cheat) pass through unchanged
    except BaseException as exc:
        described = describe_exception(exc, candidate, limit=400)
        on_cpu = any(isinstance(a, torch.Tensor) and a.device.type == "cpu" for a in args)
        if on_cpu and ("CUDA" in described or "is_cuda" in described or ".cuda()" in described):
            described += " (this run feeds CPU tensors: a kernel that needs CUDA runs with --device cuda)"
        raise KernelCrashError(described) from None


OutputSpec = list[tuple[torch.Size, torch.dtype]]
_SPEC_CACHE: dict[tuple[str, tuple[Any, ...]], OutputSpec] = {}


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        (tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else repr(a) for a in args
    )


def expected_outputs(task: Task, args: tuple[Any, ...]) -> OutputSpec:
    """Shapes and dtypes the kernel must return for ``args`` (the task's spec), cached by shapes."""
    key = (task.name, _signature(args))
    if key not in _SPEC_CACHE:
        _SPEC_CACHE[key] = task.output_spec(args)
    return _SPEC_CACHE[key]


def check_output(
    task: Task, out: Any, spec: list[tuple[torch.Size, torch.dtype]], device: torch.device
) -> tuple[torch.Tensor, ...]:
    """The kernel's output as a tuple of tensors matching ``spec`` exactly, or OutputSpecError."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != len(spec):
        raise OutputSpecError(f"kernel returned {len(outs)} outputs, the task expects {len(spec)}")
    for name, o, (shape, dtype) in zip(task.output_names, outs, spec, strict=True):
        if not isinstance(o, torch.Tensor):
            raise OutputSpecError(f"{name} is a {type(o).__name__}, not a torch.Tensor")
        if type(o) is not torch.Tensor and not isinstance(o, torch.nn.Parameter):
            raise OutputSpecError(f"{name} is a {type(o).__name__}, not a plain torch.Tensor")
        if o.shape != shape:
            raise OutputSpecError(f"{name} has shape {tuple(o.shape)}, expected {tuple(shape)}")
        if o.dtype != dtype:
            raise OutputSpecError(f"{name} has dtype {o.dtype}, expected {dtype}")
        if o.device.type != device.type:
            raise OutputSpecError(f"{name} is on {o.device}, expected {device.type}")
    return tuple(outs)


def check_layout(task: Task, outs: tuple[torch.Tensor, ...]) -> None:
    """The task's outputs are contiguous (SPEC §3), or OutputSpecError: a strided view, however right its
    values, hands the caller a layout it did not ask for (and a benchmark a copy it skipped). A task
    whose callers take any strided layout (a KernelBench reference) says so and is not checked."""
    if not task.contiguous_outputs:
        return
    for name, o in zip(task.output_names, outs, strict=True):
        if not o.is_contiguous():
            raise OutputSpecError(
                f"{name} is a non-contiguous view (shape {tuple(o.shape)}, strides {tuple(o.stride())}); "
                "the task's outputs must be contiguous"
            )


def run_checked(
    task: Task,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    candidate: Path,
    spec: list[tuple[torch.Size, torch.dtype]],
    device: torch.device,
) -> Output:
    poison_allocator(device, spec)
    out = call_kernel(fn, args, candidate)
    outs = check_output(task, out, spec, device)
    return outs if len(outs) > 1 else outs[0]
