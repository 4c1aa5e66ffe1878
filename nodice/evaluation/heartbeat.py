"""The worker's side of the job clock: progress messages to the parent over the job pipe.

Stages and steps come from the gate's progress hooks (``nodice.gate.progress``);
Triton compilations from Triton's JIT hooks, which run before and after every
compilation, and from a compiled kernel's first launch, which loads its binary (and,
in the Triton versions that build one, compiles its C launcher); native builds
(``torch.utils.cpp_extension.load_inline`` / ``load``: ninja, nvcc, the host
compiler, or waiting for another process's build of the same extension) from
the JIT build function they share; and under Triton's interpreter, which runs a launch's programs one
after another, the program each launch has reached (``program``: launch number, programs begun,
programs in the grid), so that a slow launch that keeps moving is told from a stuck one. A build's
time is off the candidate's clock;
torch caches the built extension by name and source hash, so a second worker
judging the same source loads it without building. Steps of one kind
are sent at most every ``STEP_EVERY_S``: a step whose start went unsent only makes
its deadline earlier by that much, and the pipe stays quiet during hundreds of
millisecond calls.
"""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from nodice.gate import progress
from nodice.gate.progress import StepKind

STEP_EVERY_S = 0.25


class Heartbeat:
    """Everything the worker sends to its parent goes through here, one message at a time."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._lock = threading.Lock()  # Triton may compile on another thread
        self._last_step: tuple[StepKind, float] | None = None

    def send(self, kind: str, payload: Any) -> None:
        with self._lock:
            self.conn.send((kind, payload))

    def _stage(self, name: str) -> None:
        self._last_step = None
        self.send("stage", name)

    def _step(self, kind: StepKind) -> None:
        now = time.monotonic()
        last = self._last_step
        if last is not None and last[0] == kind and now - last[1] < STEP_EVERY_S:
            return
        self._last_step = (kind, now)
        self.send("step", kind)

    def install(self) -> None:
        """Listen to the gate's progress and to Triton's compilations, in this process."""
        progress.listen(self._stage, self._step)
        _hook_triton_compiles(self)
        _hook_triton_loads(self)
        _hook_native_builds(self)
        _hook_interpreter_programs(self)


def _hook_triton_compiles(beat: Heartbeat) -> None:
    """Chain onto Triton's pre- and post-compilation hooks (absent from Triton before 3.4: nothing then)."""
    try:
        from triton import knobs
    except ImportError:
        return
    runtime = knobs.runtime
    if not (hasattr(runtime, "jit_cache_hook") and hasattr(runtime, "jit_post_compile_hook")):
        return
    before, after = runtime.jit_cache_hook, runtime.jit_post_compile_hook

    def compiling(**kwargs: Any) -> Any:
        beat.send("compile", "start")
        return before(**kwargs) if before is not None else None

    def compiled(**kwargs: Any) -> Any:
        beat.send("compile", "end")
        return after(**kwargs) if after is not None else None

    runtime.jit_cache_hook = compiling
    runtime.jit_post_compile_hook = compiled


def _hook_triton_loads(beat: Heartbeat) -> None:
    """A compiled kernel's handles (binary load, launcher build) count as compilation too."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return
    load = getattr(CompiledKernel, "_init_handles", None)
    if load is None or getattr(load, "_nodice_heartbeat", False):
        return

    def loading(self: Any) -> Any:
        if getattr(self, "module", None) is not None:  # already loaded: a no-op in Triton too
            return load(self)
        beat.send("compile", "start")
        try:
            return load(self)
        finally:
            beat.send("compile", "end")

    loading._nodice_heartbeat = True  # type: ignore[attr-defined]
    CompiledKernel._init_handles = loading  # type: ignore[method-assign]


def _hook_native_builds(beat: Heartbeat) -> None:
    """``torch.utils.cpp_extension``'s JIT build (behind ``load`` and ``load_inline``) as a compilation."""
    try:
        from torch.utils import cpp_extension
    except ImportError:  # pragma: no cover - part of torch
        return
    build = getattr(cpp_extension, "_jit_compile", None)
    if build is None or getattr(build, "_nodice_heartbeat", False):
        return

    def building(*args: Any, **kwargs: Any) -> Any:
        beat.send("compile", "native")
        try:
            return build(*args, **kwargs)
        finally:
            beat.send("compile", "end")

    building._nodice_heartbeat = True  # type: ignore[attr-defined]
    cpp_extension._jit_compile = building


def _hook_interpreter_programs(beat: Heartbeat) -> None:
    """The interpreter's grid walk (``set_grid_dim`` per launch, ``set_grid_idx`` per program) as progress."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a dependency
        return
    builder = getattr(interpreter, "interpreter_builder", None)
    set_dim, set_idx = getattr(builder, "set_grid_dim", None), getattr(builder, "set_grid_idx", None)
    if set_dim is None or set_idx is None or getattr(set_idx, "_nodice_heartbeat", False):
        return
    walk = _GridWalk()

    def grid_dim(nx: int, ny: int, nz: int) -> Any:
        walk.launch += 1
        walk.dims = (nx, ny, nz)
        return set_dim(nx, ny, nz)

    def grid_idx(x: int, y: int, z: int) -> Any:
        now = time.monotonic()
        if now - walk.sent >= STEP_EVERY_S:
            walk.sent = now
            nx, ny, nz = walk.dims
            beat.send("program", (walk.launch, (x * ny + y) * nz + z, nx * ny * nz))
        return set_idx(x, y, z)

    grid_idx._nodice_heartbeat = True  # type: ignore[attr-defined]
    builder.set_grid_dim = grid_dim  # type: ignore[union-attr]
    builder.set_grid_idx = grid_idx  # type: ignore[union-attr]


class _GridWalk:
    """Where the interpreter's walk is: the launch's number and grid, and when progress was last sent."""

    def __init__(self) -> None:
        self.launch = 0
        self.dims = (1, 1, 1)
        self.sent = 0.0
