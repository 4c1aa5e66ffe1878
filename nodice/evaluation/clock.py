"""The parent's clock for one job: fed by the worker's progress messages, it says when the job hung and where.

The worker reports each stage and each step (``nodice.gate.progress``) and
each Triton compilation (``nodice.evaluation.heartbeat``). Every step gets its
budget (:mod:`nodice.evaluation.budgets`); a compilation stops the clock, and
so does a compiler process running in the worker's process group when the
budget runs out. Time the worker spends ready to run but waiting for a CPU (a
busy machine: its scheduler's run delay) is off the clock too, so a slow run on
a loaded host is told from a hang: a loop that never ends runs (or sleeps)
through its budget either way. Under Triton's interpreter a launch runs its
programs one after another and the worker reports the program each launch has
reached: a kernel call whose programs keep beginning is a slow run, not a hang.
Each program then gets a call budget, and the call up to ``SLOW_MULTIPLE`` call
budgets; a launch that, at its pace, would need more is reported at once, as too
slow rather than stuck. With a fixed limit (``--timeout``,
``Evaluator(timeout_s=…)``) the whole job gets that many seconds of wall time
instead, and the messages only name the stage.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from nodice.evaluation.budgets import Budgets, stage_name
from nodice.gate.progress import StepKind

# How often a step kept alive by a running compiler process looks again.
COMPILER_RECHECK_S = 2.0
# Waiting for a CPU shorter than this is the usual noise of a shared host, not worth an extension.
STARVED_MIN_S = 0.5
# A kernel call that keeps moving through its programs may run this many call budgets.
SLOW_MULTIPLE = 10.0
# How a timeout message tells the user the way out.
TIMEOUT_HINT = "--timeout SECONDS sets one limit on the whole evaluation instead"


def run_delay_s(pid: int) -> float | None:
    """Seconds the main thread of ``pid`` has waited, ready to run, for a CPU (Linux schedstat)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def compiler_running(pgid: int, leader: int) -> bool:
    """Whether a process of group ``pgid`` other than ``leader`` is running (a compiler, typically).

    Idle helpers (a compile-worker pool waiting for work) sleep and do not count.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for name in entries:
        if not name.isdigit() or int(name) == leader:
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] in ("R", "D"):
            return True
    return False


class JobClock:
    """Deadline of the current step of one job (or of the whole job, with a fixed limit)."""

    def __init__(self, budgets: Budgets, fixed_s: float | None, now: float):
        self.budgets = budgets
        self.fixed_s = fixed_s
        self.started = now
        self.cap = now + (fixed_s if fixed_s is not None else budgets.job_cap_s)
        self.stage = "static"
        self.stage_started = now
        # The longest a kernel-call step took (compilation aside): what the call budget bounds.
        self.slowest_call_s = 0.0
        self.per_call = False
        self.step_started = now
        self.paused = 0.0  # seconds of the current step spent compiling: off the clock
        self._begin(now, "call")

    def _begin(self, now: float, kind: StepKind) -> None:
        """The step in progress ends and the next, of ``kind`` in the current stage, begins."""
        if self.per_call:
            self.slowest_call_s = max(self.slowest_call_s, now - self.step_started - self.paused)
        step = self.budgets.step(self.stage, kind)
        self.step_started, self.budget, self.basis = now, step.seconds, step.basis
        self.per_call = step.per_call
        self.paused = 0.0
        self.deadline = now + step.seconds
        self.compiling_since: float | None = None
        self.native = False  # the compilation in progress is a native build (load_inline), not Triton's
        self.left = step.seconds
        self.delay_mark: float | None = None  # the worker's run delay when the step began
        self.starved = 0.0  # seconds of this step spent waiting for a CPU: off the clock
        # The interpreter's walk through the grid: the program reached (launch, index, when), the
        # launch's first report (launch, index, when, programs), and how the call was judged.
        self.moved: tuple[int, int, float] | None = None
        self.walk: tuple[int, int, float, int] | None = None
        self.too_slow_s: float | None = None  # at its pace, the launch needs this much longer
        self.moving_out = False  # still moving when the slow limit ran out

    def note(self, kind: str, value: Any, now: float) -> None:
        """One progress message from the worker."""
        if kind == "stage":
            if self.stage == "reference" and self.fixed_s is None:
                # The reference file's own first step: per-call budgets scale with it from here on.
                self.budgets = self.budgets.with_reference_step(now - self.stage_started - self.paused)
            self.stage = str(value)
            self.stage_started = now
            self._begin(now, "call")
        elif kind == "step":
            self._begin(now, "harness" if value == "harness" else "call")
        elif kind == "compile" and value in ("start", "native"):
            if self.compiling_since is None:
                self.compiling_since, self.left = now, max(self.deadline - now, 0.0)
            self.native = value == "native"
            self.deadline = now + (self.budgets.compiler_cap_s if self.native else self.budgets.compile_s)
        elif kind == "program":
            launch, index, programs = value
            if self.moved is None or self.moved[:2] != (launch, index):
                self.moved = (launch, index, now)
            if self.walk is None or self.walk[0] != launch:
                self.walk = (launch, index, now, programs)
        elif kind == "compile" and self.compiling_since is not None:
            # The step's clock resumes where it stopped.
            self.paused += now - self.compiling_since
            self.compiling_since = None
            self.deadline = now + self.left

    def stop(self, now: float) -> None:
        """The job is over: its last step counts towards ``slowest_call_s`` too."""
        self._begin(now, "call")
        self.per_call = False

    def hung(
        self,
        now: float,
        compiler_busy: Callable[[], bool],
        run_delay: Callable[[], float | None] | None = None,
    ) -> bool:
        """Whether the job ran out of time: its step's budget, the fixed limit, or the cap on any job."""
        if now >= self.cap:
            return True
        if self.fixed_s is not None:
            return False
        if run_delay is not None and self.delay_mark is None:
            self.delay_mark = run_delay()
        if now < self.deadline:
            return False
        if run_delay is not None and self.delay_mark is not None:
            waited = (run_delay() or self.delay_mark) - self.delay_mark
            if waited >= STARVED_MIN_S:  # the step was kept from running: that time is not its own
                self.starved += waited
                self.delay_mark += waited
                self.deadline += waited
                return False
        if self.paused < self.budgets.compiler_cap_s and compiler_busy():
            self.paused += now - self.deadline + COMPILER_RECHECK_S
            self.deadline = now + COMPILER_RECHECK_S
            return False
        return not (self.per_call and self._moving(now))

    def _moving(self, now: float) -> bool:
        """Whether a kernel call out of budget keeps moving through the interpreter's programs (its
        deadline then moves to a call budget after the last program began)."""
        if self.moved is None or now - self.moved[2] >= self.budget:
            return False  # no program began within a call budget: stuck inside one
        ran = now - self.step_started - self.paused - self.starved
        limit = SLOW_MULTIPLE * self.budget
        if ran >= limit:
            self.moving_out = True
            return False
        left = self._launch_left()
        if left is not None and ran + left > limit:
            self.too_slow_s = left
            return False
        self.deadline = min(self.moved[2] + self.budget, now + limit - ran)
        return True

    def _launch_left(self) -> float | None:
        """Seconds the launch in progress needs to finish at its pace so far (``None``: no pace yet)."""
        if self.moved is None or self.walk is None or self.walk[0] != self.moved[0]:
            return None
        _, first, since, programs = self.walk
        _, index, when = self.moved
        if index <= first:
            return None
        return (when - since) / (index - first) * (programs - index)

    def message(self, now: float) -> str:
        """One line: how long, in which stage, and which limit ran out."""
        where = stage_name(self.stage)
        total = now - self.started
        if self.fixed_s is not None:
            return (
                f"timed out after {total:.0f} s in {where} "
                f"(fixed {self.fixed_s:g} s limit on the whole evaluation, replacing the phase budgets; "
                "a larger --timeout gives it more)"
            )
        if now >= self.cap:
            cap = self.budgets.job_cap_s
            return (
                f"timed out after {total:.0f} s in {where} (the {cap:.0f} s cap on any evaluation; "
                f"{TIMEOUT_HINT})"
            )
        if self.compiling_since is not None:
            spent = now - self.compiling_since
            if self.native:
                return (
                    f"timed out after {spent:.0f} s in {where} while a native extension was built "
                    f"(budget {self.budgets.compiler_cap_s:.0f} s per build; {TIMEOUT_HINT})"
                )
            return (
                f"timed out after {spent:.0f} s in {where} while Triton compiled a kernel "
                f"(budget {self.budgets.compile_s:.0f} s per compilation; {TIMEOUT_HINT})"
            )
        spent = now - self.step_started - self.paused - self.starved
        off = f"; {self.paused:.0f} s more compiling, off the clock" if self.paused >= 1 else ""
        off += f"; {self.starved:.0f} s more waiting for a CPU, off the clock" if self.starved >= 1 else ""
        if (self.too_slow_s is not None or self.moving_out) and self.moved is not None and self.walk:
            reached = f"program {self.moved[1] + 1} of {self.walk[3]} of the interpreter's launch"
            limit = (
                f"the {SLOW_MULTIPLE * self.budget:.0f} s a kernel call that keeps moving may take "
                f"({SLOW_MULTIPLE:.0f}x the {self.budget:.0f} s call budget)"
            )
            if self.too_slow_s is not None:
                why = f"{reached}; at this pace about {self.too_slow_s:.0f} s more, beyond {limit}"
            else:
                why = f"{reached} at the end of {limit}"
            return (
                f"timed out after {spent:.0f} s in {where}: too slow, not hung ({why}{off}; {TIMEOUT_HINT})"
            )
        return f"timed out after {spent:.0f} s in {where} ({self.basis}{off}; {TIMEOUT_HINT})"


class StartupClock:
    """The worker's own start-up (importing torch and triton): not the candidate's time."""

    def __init__(self, timeout_s: float, now: float):
        self.timeout_s, self.deadline = timeout_s, now + timeout_s

    def note(self, kind: str, value: Any, now: float) -> None:
        pass

    def hung(
        self,
        now: float,
        compiler_busy: Callable[[], bool],
        run_delay: Callable[[], float | None] | None = None,
    ) -> bool:
        return now >= self.deadline

    def message(self, now: float) -> str:
        return f"timed out: the worker did not start within {self.timeout_s:.0f} s"
