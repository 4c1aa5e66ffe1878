"""Batch-invariant mode: torch ops routed to nodice's gated kernels through ``torch.library``.

``enable_batch_invariant_mode()`` overrides ``aten::mm``, ``aten::addmm``,
``aten::bmm``, ``aten::rms_norm`` and ``aten::scaled_dot_product_attention`` for
one device type (the ``CUDA`` dispatch key, or ``CPU`` for tests under Triton's
interpreter) with routes to the bundled kernels of the ``gemm``, ``rmsnorm``
and ``attention_prefill`` tasks. ``F.linear`` needs no route of its own: it is
a CompositeImplicitAutograd op that reaches ``addmm`` (an input with a bias)
or ``mm`` (through ``matmul``), and so the routes. A model's
outputs then no longer depend on what else is in its batch, because:

* every routed kernel has passed the whole gate (static, correctness, dynamic)
  on this device model first, and an op whose kernel does not pass stays
  torch's, with the reason in the :class:`ModeReport`;
* the bundled kernels' configurations are keyed on non-batch dimensions only,
  so a row, a sequence or a matrix is computed the same way whatever shares
  its launch;
* anything a kernel does not cover (another device, a dtype the gate did not
  validate, an ``attn_mask``, dropout, 3-D attention, a call that needs a
  gradient through a kernel without a backward, …) runs torch's own
  implementation, unchanged: those calls are as batch-variant as torch is.

The mode is for eager execution (``torch.compile`` generates its own kernels);
``rms_norm`` and SDPA calls that need a gradient are torch's. Mode state is
process-wide, like the dispatcher it changes.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from nodice.errors import DeviceError, NodiceError
from nodice.gate.runtime import prepare
from nodice.kernels import bundled_kernel
from nodice.kernels.routes import ROUTES, Route, RouteStats, Target
from nodice.kernels.verdicts import GateVerdict, default_cache_file, device_name, gate_verdict, unverified
from nodice.loader import load_candidate
from nodice.tasks import get_task

log = logging.getLogger(__name__)

OPS: tuple[str, ...] = tuple(r.op for r in ROUTES)


class ModeError(NodiceError):
    """The mode cannot be enabled as asked (unknown op, another configuration already active)."""

    kind = "batch-invariant mode"


@dataclass(frozen=True)
class OpStatus:
    """Whether one aten op is routed; ``reason`` says why not, or where the verdict came from."""

    op: str
    routed: bool
    reason: str
    task: str = ""
    kernel: str = ""
    dtypes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModeReport:
    """What ``enable_batch_invariant_mode`` routed, on which device, and the gate verdicts behind it."""

    device: str
    device_name: str
    ops: tuple[OpStatus, ...]
    verdicts: tuple[GateVerdict, ...] = ()

    def status(self, op: str) -> OpStatus:
        name = op if op.startswith("aten::") else f"aten::{op}"
        for s in self.ops:
            if s.op == name:
                return s
        raise KeyError(op)

    @property
    def routed(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.ops if s.routed)

    @property
    def not_routed(self) -> dict[str, str]:
        return {s.op: s.reason for s in self.ops if not s.routed}

    def summary(self) -> str:
        head = f"batch-invariant mode on {self.device or 'no device'} ({self.device_name or '-'})"
        lines = [head]
        for s in self.ops:
            if s.routed:
                lines.append(f"  {s.op}: routed to {s.task} ({', '.join(s.dtypes)}; {s.reason})")
            else:
                lines.append(f"  {s.op}: torch ({s.reason})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Config:
    device: str
    ops: tuple[str, ...]
    verify: bool
    kernels: tuple[tuple[str, str], ...]


@dataclass(eq=False)
class _Active:
    config: _Config
    report: ModeReport
    routes: dict[str, Route]
    library: torch.library.Library | None
    refs: int = 1


_LOCK = threading.RLock()
_ACTIVE: _Active | None = None


class BatchInvariantMode:
    """A handle on the enabled mode: ``disable()`` it, or use it as a context manager.

    Handles are counted: the routes are removed when every handle that enabled
    them is disabled (so nested ``with`` blocks keep the outer one's mode), or
    at once by :func:`disable_batch_invariant_mode`.
    """

    def __init__(self, active: _Active):
        self._active = active
        self._released = False

    @property
    def report(self) -> ModeReport:
        return self._active.report

    @property
    def enabled(self) -> bool:
        return not self._released and _ACTIVE is self._active

    def stats(self) -> dict[str, RouteStats]:
        """Per routed op (``aten::mm``, …): calls routed to nodice and calls that fell back to torch."""
        return {f"aten::{op}": replace(r.stats) for op, r in self._active.routes.items()}

    def disable(self) -> None:
        if not self._released:
            self._released = True
            _release(self._active, force=False)

    def __enter__(self) -> BatchInvariantMode:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disable()


def enable_batch_invariant_mode(
    device: str | torch.device | None = None,
    *,
    ops: Iterable[str] | None = None,
    verify: bool = True,
    cache: bool | str | Path = True,
    kernels: Mapping[str, str | Path] | None = None,
) -> BatchInvariantMode:
    """Route torch ops to nodice's gated kernels on ``device``; returns a handle (also a context manager).

    ``device``: ``"cuda"`` (the current GPU), ``"cuda:N"``, or ``"cpu"`` (the
    kernels under Triton's interpreter in fp32: for tests, slow). By default
    the current GPU; with no GPU visible nothing is routed and the report says
    so. ``ops``: a subset of :data:`OPS` (default: all). ``verify=False`` skips
    the gate and routes the bundled kernels unjudged: an explicit opt-out for
    tests that must not spend the gate's time, never for real use.
    ``cache``: where gate verdicts persist (``True``: the user cache folder,
    see :mod:`nodice.kernels.verdicts`; a path: that file; ``False``: this
    process only). ``kernels`` replaces a task's bundled kernel by another file
    (for tests, or to try a candidate); it is gated like the bundled ones.

    Enabling again with the same arguments returns another handle on the same
    routes (idempotent); with different ones it raises :class:`ModeError`.
    """
    global _ACTIVE
    config = _config(device, ops, verify, kernels)
    with _LOCK:
        if _ACTIVE is not None:
            if _ACTIVE.config != config:
                raise ModeError(f"already enabled as {_ACTIVE.config}; disable it before enabling {config}")
            _ACTIVE.refs += 1
            return BatchInvariantMode(_ACTIVE)
        cache_file = _cache_file(cache)
        active = _activate(config, cache_file)
        _ACTIVE = active
    _log_report(active.report)
    return BatchInvariantMode(active)


def disable_batch_invariant_mode() -> None:
    """Remove every route now, whatever handles are still open; torch's kernels are back."""
    with _LOCK:
        if _ACTIVE is not None:
            _release(_ACTIVE, force=True)


def is_batch_invariant_mode_enabled() -> bool:
    return _ACTIVE is not None


def _release(active: _Active, *, force: bool) -> None:
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is not active:
            return
        active.refs = 0 if force else active.refs - 1
        if active.refs > 0:
            return
        if active.library is not None:
            active.library._destroy()
        _ACTIVE = None


def _resolve_device(device: str | torch.device | None) -> torch.device | None:
    if device is None:
        if not torch.cuda.is_available():
            return None
        return torch.device("cuda", torch.cuda.current_device())
    dev = torch.device(device)
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type != "cuda":
        raise DeviceError(f"'{device}' (use cuda, cuda:N or cpu)")
    if not torch.cuda.is_available():
        raise DeviceError("cuda requested but no CUDA device is visible")
    return torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)


def _config(
    device: str | torch.device | None,
    ops: Iterable[str] | None,
    verify: bool,
    kernels: Mapping[str, str | Path] | None,
) -> _Config:
    dev = _resolve_device(device)
    chosen = OPS if ops is None else tuple(op.removeprefix("aten::") for op in ops)
    unknown = [op for op in chosen if op not in OPS]
    if unknown:
        raise ModeError(f"unknown op {', '.join(unknown)} (routable: {', '.join(OPS)})")
    files = tuple(sorted((task, str(Path(p).resolve())) for task, p in (kernels or {}).items()))
    return _Config(str(dev) if dev is not None else "", tuple(o for o in OPS if o in chosen), verify, files)


def _cache_file(cache: bool | str | Path) -> Path | None:
    if cache is True:
        return default_cache_file()
    if cache is False:
        return None
    return Path(cache)


@dataclass(frozen=True)
class _Judged:
    """One task's kernel after the gate: its verdict and loaded entry point, or why it is not routed."""

    path: str
    verdict: GateVerdict | None
    fn: Any
    reason: str


_SOURCES = {
    "gate": "gate passed",
    "process": "gate passed earlier in this process",
    "disk": "gate passed (cached verdict)",
}


def _unroutable(device: str) -> str | None:
    """Why nothing can be routed on ``device`` at all, or ``None``."""
    if not device:
        return "no CUDA device is visible"
    if device.startswith("cuda") and os.environ.get("TRITON_INTERPRET") == "1":
        # triton.jit reads it when a kernel module is imported: the GPU would get the interpreter.
        return "TRITON_INTERPRET=1 is set in this process: Triton would interpret the kernels on the GPU"
    return None


def _judge(
    task: str, override: str | None, dev: torch.device, verify: bool, cache_file: Path | None
) -> _Judged:
    path = Path(override) if override else None
    try:
        path = path or bundled_kernel(task)
        verdict = gate_verdict(task, path, dev, cache_file) if verify else unverified(task, path, dev)
        if not verdict.passed:
            why = f"gate verdict on {verdict.device}: {verdict.verdict} ({verdict.reason})"
            return _Judged(str(path), verdict, None, why)
        fn = _load(task, path, verdict)
        return _Judged(str(path), verdict, fn, _SOURCES.get(verdict.source, verdict.reason))
    except NodiceError as exc:
        return _Judged(str(path or ""), None, None, exc.line())


def _load(task: str, path: Path, verdict: GateVerdict) -> Any:
    """The kernel the gate judged: the same file, unchanged since."""
    cand = load_candidate(path, "kernel", get_task(task).arity)
    if cand.sha256 != verdict.sha256:
        raise ModeError(f"{path.name} changed after the gate judged it; enable the mode again")
    return cand.fn


def _activate(config: _Config, cache_file: Path | None) -> _Active:
    """Gate each needed task's kernel, load those that pass, register their routes."""
    reason = _unroutable(config.device)
    if reason is not None:
        ops = tuple(OpStatus(f"aten::{op}", False, reason) for op in config.ops)
        return _Active(config, _with_linear(ModeReport(config.device, "", ops)), {}, None)
    dev = torch.device(config.device)
    prepare(dev)
    name = device_name(dev)
    overrides = dict(config.kernels)
    chosen = [r for r in ROUTES if r.op in config.ops]
    # Every verdict before any route: the gate's references run torch ops that must still be torch's.
    judged: dict[str, _Judged] = {}
    for task in dict.fromkeys(r.task for r in chosen):
        judged[task] = _judge(task, overrides.get(task), dev, config.verify, cache_file)
    statuses: list[OpStatus] = []
    routes: dict[str, Route] = {}
    for route_cls in chosen:
        j = judged[route_cls.task]
        op = f"aten::{route_cls.op}"
        if j.fn is None or j.verdict is None:
            statuses.append(OpStatus(op, False, j.reason, route_cls.task, j.path))
            continue
        dtypes = frozenset(getattr(torch, d) for d in j.verdict.dtypes)
        routes[route_cls.op] = route_cls(j.fn, Target(dev, name, dtypes))
        statuses.append(OpStatus(op, True, j.reason, route_cls.task, j.path, j.verdict.dtypes))
    library = _register(routes.values()) if routes else None
    verdicts = tuple(j.verdict for j in judged.values() if j.verdict is not None)
    report = ModeReport(str(dev), name, tuple(statuses), verdicts)
    return _Active(config, _with_linear(report), routes, library)


@dataclass(frozen=True)
class GatedKernel:
    """One task's bundled kernel for callers outside the aten routes (e.g. a framework integration).

    ``fn`` is the gated kernel, or ``None`` with ``reason`` saying why it is not usable;
    ``dtypes`` are the dtypes the gate validated on this device.
    """

    task: str
    kernel: str
    fn: Any
    reason: str
    dtypes: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return self.fn is not None


def gated_kernel(
    task: str, device: str | torch.device, *, verify: bool = True, cache: bool | str | Path = True
) -> GatedKernel:
    """``task``'s bundled kernel on ``device`` once the gate has passed it there (the mode's rule)."""
    dev = _resolve_device(device)
    reason = _unroutable(str(dev) if dev is not None else "")
    if dev is None or reason is not None:
        return GatedKernel(task, "", None, reason or "no device")
    prepare(dev)
    j = _judge(task, None, dev, verify, _cache_file(cache))
    dtypes = j.verdict.dtypes if j.fn is not None and j.verdict is not None else ()
    return GatedKernel(task, j.path, j.fn, j.reason, dtypes)


def _register(routes: Iterable[Route]) -> torch.library.Library:
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch warns once that an existing kernel is overridden: that is the point here.
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        for route in routes:
            for key in route.dispatch_keys():
                library.impl(route.op, route, key)
    return library


def _with_linear(report: ModeReport) -> ModeReport:
    """``aten::linear`` is routed exactly when ``mm`` and ``addmm`` are, being their composite."""
    names = {s.op: s for s in report.ops}
    mm, addmm = names.get("aten::mm"), names.get("aten::addmm")
    if mm is None or addmm is None:
        return report
    routed = mm.routed and addmm.routed
    via = "CompositeImplicitAutograd: reaches aten::addmm (an input with a bias) or aten::mm"
    reason = via if routed else f"{via}, not both routed"
    linear = OpStatus("aten::linear", routed, reason, "gemm", mm.kernel, mm.dtypes if routed else ())
    return replace(report, ops=(*report.ops, linear))


def _log_report(report: ModeReport) -> None:
    log.info("%s", report.summary())
    for op, reason in report.not_routed.items():
        if reason.startswith("gate verdict"):
            log.warning("%s is not routed: %s", op, reason)


__all__ = [
    "OPS",
    "BatchInvariantMode",
    "GatedKernel",
    "ModeError",
    "ModeReport",
    "OpStatus",
    "RouteStats",
    "disable_batch_invariant_mode",
    "enable_batch_invariant_mode",
    "gated_kernel",
    "is_batch_invariant_mode_enabled",
]
