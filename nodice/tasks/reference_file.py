"""A KernelBench-style reference file: ``Model``, ``get_inputs()``, ``get_init_inputs()``.

:func:`read_reference` imports the file, calls ``get_inputs()`` once and runs
``Model`` on what it returns, and checks everything the gate relies on: every
tensor input and every output carries the batch axis, with one batch size.
Each failure is a :class:`nodice.errors.ReferenceFileError`, one line naming the file and
what is wrong with it; a ``Model`` whose output has no batch axis (a batch-mean
loss) is a :class:`nodice.errors.NotApplicableError`.

Before anything is allocated, ``get_inputs()`` runs once on PyTorch's meta
device, which gives the shapes for free: a problem sized for a large GPU (some
KernelBench problems draw several gigabytes a call) is refused with the size it
needs, the memory this process may use, and the ``--batch-size`` that fits.
``--batch-size N`` shrinks the batch axis only: through the file's own
``batch_size`` global where ``get_inputs()`` reads one (KernelBench's convention),
otherwise by keeping the first N samples of each call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nodice.errors import (
    CandidateLoadError,
    NodiceError,
    NotApplicableError,
    ReferenceFileError,
    interrupts_are_raised,
)
from nodice.references import ReferenceSpec

# ``Model`` and ``ModelNew`` are built under this seed, so parameters a module draws at
# construction are the same in both (KernelBench seeds both constructions alike).
INIT_SEED = 42
# The gate holds about this many batches of the reference's own size at once (the inputs, their
# fp32 copy for the reference, the reference's output and the candidate's).
BATCHES_HELD = 4
# The file-level name KernelBench's problems give their batch size.
BATCH_GLOBAL = "batch_size"


@dataclass(frozen=True)
class InputSlot:
    """One positional argument of ``Model.forward``: a batched tensor or a value passed through."""

    name: str
    batched: bool
    shape: tuple[int, ...] = ()
    dtype: torch.dtype | None = None
    value: Any = None


@dataclass(frozen=True)
class OutputSlot:
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class ReferenceFile:
    """What the gate needs to know about a reference file, read once."""

    path: Path
    batch_axis: int
    batch: int  # the batch size get_inputs() returns: the "full" batch
    inputs: tuple[InputSlot, ...]
    outputs: tuple[OutputSlot, ...]
    model_cls: type[torch.nn.Module]
    get_inputs: Callable[[], Any]
    init_inputs: tuple[Any, ...]
    # The tuple/list shape of Model's return value (False: one tensor).
    returns_tuple: bool
    # Modules run in training mode (KernelBench's harness never calls .eval()) unless this is set.
    eval_mode: bool = False
    # How the batch was shrunk ("" when get_inputs() gives it as it is).
    shrunk: str = ""


def _where(exc: BaseException, path: Path) -> str:
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" at {path.name}:{frames[-1].lineno}" if frames else ""


def call_user(
    fn: Callable[[], Any], what: str, path: Path, error: type[NodiceError] = ReferenceFileError
) -> Any:
    """Run user code; any exception becomes one ``error`` line naming ``what`` and where it failed."""
    try:
        return fn()
    except NodiceError:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) and not interrupts_are_raised():
            raise
        msg = (str(exc).strip().splitlines() or [""])[0]
        raise error(f"{what} failed{_where(exc, path)}: {type(exc).__name__}: {msg}"[:400]) from None


def as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ReferenceFileError(f"{what} must return a list or tuple, not {type(value).__name__}")


def forward_names(cls: type, count: int) -> list[str]:
    """Names of ``cls.forward``'s positional parameters (``arg<i>`` where it has none)."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())[1:]  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(count)]


def seeded(fn: Callable[[], Any], seed: int) -> Any:
    """``fn()`` with torch's global generators seeded, leaving the caller's state as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn()


def _read_inputs(path: Path, raw: list[Any], axis: int, names: list[str]) -> tuple[int, list[InputSlot]]:
    slots: list[InputSlot] = []
    batch: int | None = None
    first = ""
    for i, (name, value) in enumerate(zip(names, raw, strict=True)):
        label = f"input {i} ({name})"
        if not isinstance(value, torch.Tensor):
            slots.append(InputSlot(name, False, value=value))
            continue
        if value.dim() <= axis:
            raise ReferenceFileError(
                f"{path.name}: {label} has shape {tuple(value.shape)}, no batch axis {axis} "
                "(every tensor input must carry the batch axis; see --batch-axis)"
            )
        size = int(value.shape[axis])
        if batch is None:
            batch, first = size, label
        elif size != batch:
            raise ReferenceFileError(
                f"{path.name}: {label} has {size} on batch axis {axis}, {first} has {batch} "
                "(every tensor input must carry the batch axis; see --batch-axis)"
            )
        slots.append(InputSlot(name, True, tuple(value.shape), value.dtype))
    if batch is None:
        raise ReferenceFileError(f"{path.name}: get_inputs() returns no tensor, so there is no batch axis")
    if batch < 1:
        raise ReferenceFileError(f"{path.name}: get_inputs() returns an empty batch (size 0 on axis {axis})")
    return batch, slots


def _read_outputs(path: Path, out: Any, axis: int, batch: int) -> tuple[list[OutputSlot], bool]:
    is_tuple = isinstance(out, (tuple, list))
    outs = list(out) if is_tuple else [out]
    if not outs:
        raise ReferenceFileError(f"{path.name}: Model returns an empty {type(out).__name__}")
    slots = []
    for i, o in enumerate(outs):
        label = f"output {i}" if is_tuple else "the output"
        if not isinstance(o, torch.Tensor):
            raise ReferenceFileError(f"{path.name}: {label} of Model is a {type(o).__name__}, not a tensor")
        if batch > 1 and (o.dim() <= axis or int(o.shape[axis]) == 1):
            raise NotApplicableError(
                f"{path.name}: {label} of Model has shape {tuple(o.shape)} for a batch of {batch}: it "
                f"reduces over the batch axis (as a batch-mean loss does), so no sample has an output "
                "of its own and no candidate can be judged for batch invariance"
            )
        if o.dim() <= axis or int(o.shape[axis]) != batch:
            raise ReferenceFileError(
                f"{path.name}: {label} of Model has shape {tuple(o.shape)}, not {batch} on batch axis "
                f"{axis} like the inputs: a sample's output must be its slice of the batch"
            )
        slots.append(OutputSlot(tuple(o.shape), o.dtype))
    return slots, is_tuple


def _meta_inputs(get_inputs: Callable[[], Any]) -> list[Any] | None:
    """What ``get_inputs()`` returns, drawn on the meta device (shapes, no memory); None if it cannot."""
    try:
        with torch.device("meta"):
            raw = seeded(get_inputs, INIT_SEED)
    except Exception:  # a get_inputs that moves or reads its tensors: sized by the real call instead
        return None
    return list(raw) if isinstance(raw, (list, tuple)) else None


def _batch_of(raw: list[Any], axis: int) -> int | None:
    sizes = [int(v.shape[axis]) for v in raw if isinstance(v, torch.Tensor) and v.dim() > axis]
    return sizes[0] if sizes else None


def _nbytes(raw: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in raw if isinstance(v, torch.Tensor))


def memory_available() -> int | None:
    """Bytes this process may still allocate: the host's available memory, within an address-space cap."""
    import resource

    avail: int | None = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as f:
                used = int(f.read().split()[0]) * resource.getpagesize()
            room = max(soft - used, 0)
            avail = room if avail is None else min(avail, room)
        except (OSError, ValueError, IndexError):
            pass
    return avail


def device_memory(device: torch.device) -> tuple[int | None, str]:
    """Bytes the gate may still allocate on ``device``, and where they are (for messages): the memory
    this process may use on CPU, the device's free memory on CUDA."""
    if device.type != "cuda":
        return memory_available(), "this process may use"
    free, _ = torch.cuda.mem_get_info(device)
    # What torch's allocator holds without using it is free for this process too.
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return free, f"free on {torch.cuda.get_device_name(device)}"


def gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def too_large(nbytes: int, available: int | None) -> bool:
    """Whether ``BATCHES_HELD`` batches of ``nbytes`` are more than ``available`` (None: unknown, never)."""
    return available is not None and BATCHES_HELD * nbytes > available


def check_fits(
    path: Path, nbytes: int, batch: int, available: int | None, where: str, sliced: int | None = None
) -> None:
    """Refuse a batch the gate cannot hold ``BATCHES_HELD`` times in ``available`` bytes of ``where``.
    ``sliced``: the --batch-size asked for, where it is taken from the whole batch each call draws."""
    if available is None or not too_large(nbytes, available):
        return
    per_sample = max(nbytes // max(batch, 1), 1)
    if sliced is not None:
        raise ReferenceFileError(
            f"{path.name}: one get_inputs() call takes {gb(nbytes)} (batch {batch}) and the gate holds "
            f"about {BATCHES_HELD} such calls, more than the {gb(available)} {where}; --batch-size "
            f"{sliced} cannot help, since the file has no {BATCH_GLOBAL} global that sizes the batch "
            "alone and each call draws the whole batch before the first samples are taken: "
            "make get_inputs() draw fewer samples in a copy of the file"
        )
    fits = max(available // (BATCHES_HELD * per_sample), 0)
    hint = f"--batch-size {fits} fits" if fits >= 1 else "not even one sample fits"
    raise ReferenceFileError(
        f"{path.name}: one get_inputs() call takes {gb(nbytes)} (batch {batch}, {gb(per_sample)} a "
        f"sample) and the gate holds about {BATCHES_HELD} such batches, more than the {gb(available)} "
        f"{where}: shrink the batch axis with --batch-size N ({hint})"
    )


def _shrink(
    path: Path, module: Any, spec: ReferenceSpec, meta: list[Any] | None, full: int | None
) -> tuple[Callable[[], Any], str]:
    """``get_inputs`` giving batches of ``spec.batch_size``, and how it was done."""
    n, axis, get_inputs = spec.batch_size, spec.batch_axis, module.get_inputs
    if n is None or n == full:
        return get_inputs, ""
    if full is not None and n > full:
        raise ReferenceFileError(
            f"{path.name}: --batch-size {n} is larger than get_inputs()'s batch of {full} "
            "(--batch-size only shrinks the batch)"
        )
    own = getattr(module, BATCH_GLOBAL, None)
    if meta is not None and isinstance(own, int) and not isinstance(own, bool) and own == full:
        setattr(module, BATCH_GLOBAL, n)
        again = _meta_inputs(get_inputs)
        want = [
            tuple(n if d == axis else s for d, s in enumerate(v.shape))
            if isinstance(v, torch.Tensor)
            else None
            for v in meta
        ]
        got = [tuple(v.shape) if isinstance(v, torch.Tensor) else None for v in again or []]
        if again is not None and got == want:
            return get_inputs, f"its {BATCH_GLOBAL} global set to {n} (was {full})"
        setattr(module, BATCH_GLOBAL, own)  # the global sizes more than the batch: slice instead

    def first_n() -> list[Any]:
        raw = as_list(get_inputs(), "get_inputs()")
        return [
            v.narrow(axis, 0, n).clone() if isinstance(v, torch.Tensor) and v.dim() > axis else v for v in raw
        ]

    return first_n, f"the first {n} samples of each get_inputs() call"


def read_reference(path: str | Path, batch_axis: int | ReferenceSpec = 0) -> ReferenceFile:
    """Import and validate a reference file (runs its ``get_inputs`` and ``Model`` once, on CPU)."""
    from nodice.loader import import_file

    spec = batch_axis if isinstance(batch_axis, ReferenceSpec) else ReferenceSpec(Path(path), batch_axis)
    batch_axis = spec.batch_axis
    if batch_axis < 0:
        raise ReferenceFileError(f"--batch-axis must be 0 or more, not {batch_axis}")
    try:
        p, _, module = import_file(path, "nodice_reference")
    except CandidateLoadError as exc:
        raise ReferenceFileError(str(exc)) from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ReferenceFileError(
            f"{p.name} defines no {', '.join(missing)} (a reference needs Model, get_inputs and "
            "get_init_inputs)"
        )
    model_cls = module.Model
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise ReferenceFileError(f"Model in {p.name} is not a torch.nn.Module class")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name)):
            raise ReferenceFileError(f"{name} in {p.name} is not callable")
    # Seeded as KernelBench seeds it, so an initial value drawn at random is the same in every process.
    init = tuple(
        as_list(
            seeded(lambda: call_user(module.get_init_inputs, "get_init_inputs()", p), INIT_SEED),
            "get_init_inputs()",
        )
    )
    meta = _meta_inputs(module.get_inputs)
    full = None if meta is None else _batch_of(meta, batch_axis)
    if full == 0:
        raise ReferenceFileError(f"{p.name}: get_inputs() gives a batch of 0 samples (axis {batch_axis})")
    get_inputs, shrunk = _shrink(p, module, spec, meta, full)
    if meta is not None and full is not None:
        # The size one call will take, checked before it is taken (slicing draws the full batch first).
        n = spec.batch_size if spec.batch_size is not None and shrunk.startswith("its ") else full
        sliced = spec.batch_size if shrunk.startswith("the first ") else None
        check_fits(p, _nbytes(meta) * n // full, n, memory_available(), "this process may use", sliced)
    raw = as_list(seeded(lambda: call_user(get_inputs, "get_inputs()", p), INIT_SEED), "get_inputs()")
    if not raw:
        raise ReferenceFileError(f"{p.name}: get_inputs() returns no inputs")
    names = forward_names(model_cls, len(raw))
    batch, inputs = _read_inputs(p, raw, batch_axis, names)
    model = seeded(lambda: call_user(lambda: model_cls(*init), "Model(*get_init_inputs())", p), INIT_SEED)
    model.train(not spec.eval_mode)
    with torch.no_grad():
        out = call_user(lambda: model(*raw), "Model.forward(*get_inputs())", p)
    outputs, is_tuple = _read_outputs(p, out, batch_axis, batch)
    return ReferenceFile(
        p,
        batch_axis,
        batch,
        tuple(inputs),
        tuple(outputs),
        model_cls,
        get_inputs,
        init,
        is_tuple,
        spec.eval_mode,
        shrunk,
    )
