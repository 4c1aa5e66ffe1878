"""The sandbox's time and output limits: hangs reported within one step's budget, output capped, not fatal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from nodice.evaluation import Evaluation, Evaluator
from nodice.evaluation.budgets import CALL_FLOOR_S, IMPORT_S, Budgets, stage_name
from nodice.evaluation.clock import SLOW_MULTIPLE, TIMEOUT_HINT, JobClock, run_delay_s
from nodice.evaluation.output import HEAD_BYTES, TAIL_BYTES, OutputCapture
from nodice.evaluation.store import ResultStore
from tests.conftest import ROOT

HOSTILE = Path(__file__).parent / "adversarial"
# A hang must be reported well within a minute of asking, worker start-up included.
REPORTED_WITHIN_S = 60


def test_budgets_come_from_the_task_and_device() -> None:
    cpu = Budgets.for_task("attention_prefill", "cpu")
    assert cpu.seed_call_s is not None and cpu.call_s >= CALL_FLOOR_S
    assert Budgets.for_task("rmsnorm", "cuda").call_s == CALL_FLOOR_S  # GPU seed calls take milliseconds
    assert Budgets.for_task("no-such-task", "cpu").call_s == CALL_FLOOR_S
    for task in ("rmsnorm", "attention_prefill"):
        # Every default budget reports a hang well under a minute.
        assert Budgets.for_task(task, "cpu").call_s < 50 and IMPORT_S < 50
    assert stage_name("bench:cpu-small") == "benchmark workload cpu-small"


def idle() -> bool:
    return False


@pytest.mark.parametrize(("reference_s", "call_s"), [(4.0, 48.0), (0.5, CALL_FLOOR_S)])
def test_a_reference_files_call_budget_follows_its_own_first_step(reference_s: float, call_s: float) -> None:
    """A KernelBench problem has no seed: its first step (import, get_inputs(), one Model call) sets
    the call budget, 12 times it, never below the floor; a fixed --timeout replaces all of it."""
    task = "reference:/problems/level1_93_masked_cumsum.py"
    clock = JobClock(Budgets.for_task(task, "cuda"), None, now=0.0)
    clock.note("stage", "reference", 0.0)
    clock.note("stage", "static", reference_s)
    assert clock.budgets.call_s == call_s and clock.budgets.reference_step_s == reference_s
    clock.note("stage", "guards", 10.0)
    assert not clock.hung(10.0 + call_s - 0.5, idle)
    assert clock.hung(10.0 + call_s + 0.5, idle)
    line = clock.message(10.0 + call_s + 0.5)
    assert line.startswith(f"timed out after {call_s:.0f} s in the anti-cheat probes (budget {call_s:.0f} s")
    if call_s > CALL_FLOOR_S:
        assert (
            "12x the reference's own first step (4.0 s: its import, get_inputs() and one Model call)" in line
        )
    else:
        assert "the minimum" in line
    fixed = JobClock(Budgets.for_task(task, "cuda"), 30.0, now=0.0)
    fixed.note("stage", "reference", 0.0)
    fixed.note("stage", "static", reference_s)
    assert fixed.budgets.call_s == CALL_FLOOR_S and fixed.budgets.reference_step_s is None


def compiling() -> bool:
    return True


def test_the_clock_times_each_step_and_stops_while_triton_compiles() -> None:
    budgets = Budgets.for_task("rmsnorm", "cuda")
    clock = JobClock(budgets, None, now=0.0)
    clock.note("stage", "dynamic", 1.0)
    for t in range(2, 200, 5):  # a long stage of quick calls never runs out
        clock.note("step", "call", float(t))
        assert not clock.hung(t + 4.0, idle)
    clock.note("step", "call", 300.0)
    clock.note("compile", "start", 305.0)
    assert not clock.hung(305.0 + budgets.compile_s - 1, idle)  # compiling: off the call's clock
    clock.note("compile", "end", 400.0)
    # The call's clock resumes where it stopped: 5 s were spent before the compilation.
    assert not clock.hung(400.0 + budgets.call_s - 5.5, idle)
    assert clock.hung(400.0 + budgets.call_s - 4.5, idle)
    line = clock.message(400.0 + budgets.call_s - 4.5)
    assert line.startswith(f"timed out after {budgets.call_s:.0f} s in dynamic validation (budget ")
    assert "compiling, off the clock" in line


def test_a_running_compiler_process_extends_the_step_and_a_fixed_limit_does_not() -> None:
    budgets = Budgets.for_task("rmsnorm", "cpu")
    clock = JobClock(budgets, None, now=0.0)
    clock.note("stage", "load", 0.0)
    now = budgets.import_s + 0.5
    while not clock.hung(now, compiling):  # a compiler that never ends is waited for up to the cap
        now += 1.0
    assert budgets.import_s + budgets.compiler_cap_s <= now <= budgets.import_s + budgets.compiler_cap_s + 5
    assert "compiling, off the clock" in clock.message(now)
    fixed = JobClock(budgets, 5.0, now=0.0)
    fixed.note("stage", "dynamic", 1.0)
    fixed.note("step", "call", 4.9)
    assert fixed.hung(5.0, compiling)
    assert fixed.message(5.0) == (
        "timed out after 5 s in dynamic validation "
        "(fixed 5 s limit on the whole evaluation, replacing the phase budgets; "
        "a larger --timeout gives it more)"
    )


class RunDelay:
    """The worker's scheduler run delay as the clock reads it: seconds spent waiting for a CPU."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def test_time_spent_waiting_for_a_cpu_is_off_the_clock_and_a_sleeping_hang_is_not() -> None:
    budgets = Budgets.for_task("sampling", "cpu")
    call = budgets.call_s
    delay = RunDelay()
    clock = JobClock(budgets, None, now=0.0)
    clock.note("stage", "correctness", 0.0)
    assert not clock.hung(0.1, idle, delay)  # the step's run delay is marked at its first look
    # A busy host: the step ran for 40 % of the wall time and waited for a CPU the rest.
    delay.seconds = 0.6 * (call + 5)
    assert not clock.hung(call + 5, idle, delay)
    assert not clock.hung(call + 5 + 0.6 * (call + 5) - 6, idle, delay)
    # The step's own running time reaches the budget: a loop that never ends is still reported.
    delay.seconds += 0.2  # below the noise floor: not an extension
    now = 0.1 + call + 0.6 * (call + 5) + 0.05
    assert clock.hung(now, idle, delay)
    line = clock.message(now)
    assert f"s more waiting for a CPU, off the clock; {TIMEOUT_HINT})" in line
    # A worker that sleeps (a deadlock, time.sleep) waits for nothing: cut at its budget.
    asleep = JobClock(budgets, None, now=0.0)
    asleep.note("stage", "dynamic", 0.0)
    still = RunDelay()
    assert not asleep.hung(0.05, idle, still)
    assert asleep.hung(call + 0.1, idle, still)


def test_run_delay_reads_the_schedulers_wait_for_a_cpu() -> None:
    """Two busy processes on one CPU: each waits about half the time, and schedstat says so."""
    if run_delay_s(os.getpid()) is None:
        pytest.skip("no /proc/<pid>/schedstat on this kernel")
    cpu = min(os.sched_getaffinity(0))

    def busy(seconds: int) -> str:
        pin = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\n"
        return pin + f"t = time.time()\nwhile time.time() - t < {seconds}: pass"

    rival = subprocess.Popen([sys.executable, "-c", busy(3)])
    code = busy(2)
    me = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)
        before = run_delay_s(me.pid)
        time.sleep(1.0)
        after = run_delay_s(me.pid)
    finally:
        me.wait(10)
        rival.wait(10)
    assert before is not None and after is not None
    assert after - before > 0.2  # sharing one CPU: ~0.5 s of each second is spent waiting


def test_output_capture_keeps_head_and_tail() -> None:
    read, write = os.pipe()
    capture = OutputCapture(read)
    lines = 100_000  # 1.3 MB, far more than a pipe holds: it must be read while it is written
    writer = subprocess.Popen(
        [sys.executable, "-c", f"for i in range({lines}): print('line %07d' % i)"], stdout=write
    )
    os.close(write)
    capture.drain(60)
    writer.wait(10)
    text = capture.text()
    assert text.startswith("line 0000000\n") and text.endswith(f"line {lines - 1:07d}\n")
    assert f"[... {13 * lines - HEAD_BYTES - TAIL_BYTES} bytes of output dropped ...]" in text
    capture.close()


# The call hangs waiting: a spinning hang (hang_in_call.py, fixed limits below and in
# test_adversarial.py) is timed by the same clock, and would burn a CPU for the whole default budget.
EVALUATOR_HANGS = {
    "hang_waiting_in_call.py": (
        "in the anti-cheat probes",
        "per kernel call",
        "stuck at hang_waiting_in_call.py:",
    ),
    "hang_at_import.py": ("in the candidate's import", "module-level code", "at hang_at_import.py:"),
}


def _judge(name: str) -> tuple[float, Evaluation, Evaluation]:
    with Evaluator(device="cpu", isolation="persistent") as ev:
        t0 = time.monotonic()
        e = ev.evaluate(HOSTILE / name, "rmsnorm", seed=1, bench=False)
        took = time.monotonic() - t0
        # The worker was replaced: the next candidate is judged normally.
        return took, e, ev.evaluate(HOSTILE / "control_honest.py", "rmsnorm", seed=1, bench=False)


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nodice", "check", *args, "--task", "rmsnorm", "--device", "cpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str, float]:
    out, err = proc.communicate(timeout=200)
    return out, err, time.monotonic()


@pytest.fixture(scope="module")
def hangs() -> Iterator[dict[str, Any]]:
    """The module's default-budget hangs, all started at once: the evaluator's two (one evaluator
    each) and the command line's three, so that their budgets run out together, not test by test."""
    with ThreadPoolExecutor(len(EVALUATOR_HANGS) + 3) as pool:
        judged = {name: pool.submit(_judge, name) for name in EVALUATOR_HANGS}
        t0 = time.monotonic()
        runs = {
            "call": _cli(str(HOSTILE / "hang_waiting_in_call.py")),
            "import": _cli(str(HOSTILE / "hang_at_import.py")),
            "fixed": _cli(str(HOSTILE / "hang_in_call.py"), "--timeout", "5"),
        }
        try:
            yield {
                "judged": judged,
                "t0": t0,
                "runs": runs,
                "ended": {k: pool.submit(_finish, p) for k, p in runs.items()},
            }
        finally:
            for p in runs.values():
                if p.poll() is None:
                    p.kill()


@pytest.mark.timeout(240)
def test_hangs_are_reported_fast_by_default_with_their_stage(hangs: dict[str, Any]) -> None:
    for name, phrases in EVALUATOR_HANGS.items():
        took, e, after = hangs["judged"][name].result()
        assert took < REPORTED_WITHIN_S, (name, took)
        assert e.verdict == "error" and e.check.exit_code == 2
        assert e.check.reason.startswith("timed out after "), e.check.reason
        for phrase in phrases:
            assert phrase in e.check.reason, e.check.reason
        assert "(most recent call first)" in e.log  # the Python stacks asked for before the kill
        assert after.verdict == "pass", after.check.reason


@pytest.mark.timeout(240)
def test_check_cli_reports_hangs_within_a_minute_and_timeout_overrides(hangs: dict[str, Any]) -> None:
    results = {k: f.result() for k, f in hangs["ended"].items()}
    took = max(ended for _, _, ended in results.values()) - hangs["t0"]
    assert took < REPORTED_WITHIN_S + 20  # three at once on a small machine (and two evaluators)
    for key, p in hangs["runs"].items():
        _, stderr, _ = results[key]
        lines = stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, stderr
        assert lines[0].startswith("timed out after "), lines[0]
    assert "in the anti-cheat probes (budget " in results["call"][1]
    assert "in the candidate's import (budget 30 s" in results["import"][1]
    assert "after 5 s in the anti-cheat probes (fixed 5 s limit" in results["fixed"][1]


@pytest.mark.timeout(240)
def test_a_flood_of_output_is_dropped_and_the_kernel_judged(tmp_path: Path) -> None:
    store = tmp_path / "noisy.sqlite"
    with Evaluator(device="cpu", store=store) as ev:
        e = ev.evaluate(HOSTILE / "control_noisy.py", "rmsnorm", seed=2)
    assert e.verdict == "pass" and e.geomean > 0, e.check.reason
    dropped = int(e.log.split("[... ")[1].split(" bytes")[0])
    assert dropped > 250 << 20 and len(e.log) < HEAD_BYTES + TAIL_BYTES + 100
    assert e.log.startswith("chatty kernel")
    with ResultStore(store) as s:
        (stored,) = list(s.evaluations())
    assert stored.log == e.log


LINE_BY_LINE = """
import torch


def kernel(x, weight, eps):
    for i in range(3000):
        print("chatty line", i)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)
"""


def test_output_printed_line_by_line_is_capped_where_it_is_made(tmp_path: Path) -> None:
    """Printing beyond the cap never reaches the pipe: the worker keeps the head and the tail itself."""
    cand = tmp_path / "lines.py"
    cand.write_text(LINE_BY_LINE, encoding="utf-8")
    with Evaluator(device="cpu") as ev:
        e = ev.evaluate(cand, "rmsnorm", seed=5)
    assert e.verdict == "pass", e.check.reason
    head, marker, tail = e.log.partition(" bytes of output dropped ...]")
    assert head.startswith("chatty line 0\nchatty line 1\n") and marker
    assert int(head.rsplit("[... ", 1)[1]) > 1 << 20  # every call printed 3000 lines
    assert tail.endswith("chatty line 2999\n")
    assert e.log.count("bytes of output dropped") == 1
    assert len(e.log) < HEAD_BYTES + TAIL_BYTES


def test_a_capped_stream_keeps_the_head_and_the_last_characters() -> None:
    from nodice.evaluation.output import CappedStream

    sink = io.StringIO()
    stream = CappedStream(sink, head=10, tail=20)
    for i in range(10_000):
        stream.write(f"{i:05d}\n")
    stream.finish()
    text = sink.getvalue()
    assert text.startswith("00000\n0000") and text.endswith("09997\n09998\n09999\n")
    kept_tail = text.rsplit("]\n", 1)[1]
    assert len(kept_tail) == 20
    assert f"[... {60_000 - 10 - 20} bytes of output dropped ...]" in text


def test_a_kernels_first_launch_counts_as_compilation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a compiled kernel (and building its launcher) is bracketed like a compilation,
    even when it fails (here: no GPU driver), and an already loaded kernel sends nothing."""
    from multiprocessing import Pipe

    from triton.compiler.compiler import CompiledKernel

    from nodice.evaluation import heartbeat

    monkeypatch.setattr(CompiledKernel, "_init_handles", CompiledKernel._init_handles)
    parent, child = Pipe()
    heartbeat._hook_triton_loads(heartbeat.Heartbeat(child))
    heartbeat._hook_triton_loads(heartbeat.Heartbeat(child))  # installed once
    kernel = CompiledKernel.__new__(CompiledKernel)
    kernel.module, kernel._module_pid = None, None  # as __init__ leaves them (its __del__ reads both)
    with pytest.raises(Exception):  # noqa: B017 - Triton's own error on a machine without a GPU
        kernel._init_handles()
    assert [parent.recv(), parent.recv()] == [("compile", "start"), ("compile", "end")]
    assert not parent.poll()
    kernel.module = object()
    kernel._init_handles()
    assert not parent.poll()


def test_a_native_build_is_bracketed_like_a_compilation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """load_inline / load go through torch's JIT build: its time is off the clock, even when it fails."""
    from multiprocessing import Pipe

    from torch.utils import cpp_extension

    from nodice.evaluation import heartbeat

    monkeypatch.setattr(cpp_extension, "_jit_compile", cpp_extension._jit_compile)
    parent, child = Pipe()
    heartbeat._hook_native_builds(heartbeat.Heartbeat(child))
    heartbeat._hook_native_builds(heartbeat.Heartbeat(child))  # installed once
    with pytest.raises(OSError):  # the source does not exist: torch fails before any compiler runs
        cpp_extension.load(
            "nodice_missing_ext", [str(tmp_path / "missing.cpp")], build_directory=str(tmp_path)
        )
    assert [parent.recv(), parent.recv()] == [("compile", "native"), ("compile", "end")]
    assert not parent.poll()


def test_a_native_build_gets_the_compiler_budget_and_its_own_message() -> None:
    budgets = Budgets.for_task("rmsnorm", "cuda")
    clock = JobClock(budgets, None, now=0.0)
    clock.note("stage", "guards", 0.0)
    clock.note("step", "call", 1.0)
    clock.note("compile", "native", 2.0)
    assert not clock.hung(2.0 + budgets.compiler_cap_s - 1, idle)  # an nvcc build takes minutes
    assert clock.hung(2.0 + budgets.compiler_cap_s + 1, idle)
    assert clock.message(2.0 + budgets.compiler_cap_s + 1) == (
        f"timed out after {budgets.compiler_cap_s + 1:.0f} s in the anti-cheat probes while a native "
        f"extension was built (budget {budgets.compiler_cap_s:.0f} s per build; {TIMEOUT_HINT})"
    )
    clock = JobClock(budgets, None, now=0.0)
    clock.note("stage", "guards", 0.0)
    clock.note("step", "call", 1.0)
    clock.note("compile", "native", 2.0)
    clock.note("compile", "end", 300.0)  # built: the call's clock resumes with its 1 s spent
    assert not clock.hung(300.0 + budgets.call_s - 1.5, idle)
    assert clock.hung(300.0 + budgets.call_s - 0.5, idle)


def test_a_call_that_keeps_moving_through_its_programs_is_slow_not_hung() -> None:
    """Under the interpreter each program's start is progress: every program gets a call budget,
    the call up to SLOW_MULTIPLE budgets; a program that never ends is still cut one budget after
    it began, and a launch too long at its pace is reported at once, as too slow."""
    budgets = Budgets.for_task("rmsnorm", "cpu")
    call = budgets.call_s
    slow = JobClock(budgets, None, now=0.0)
    slow.note("stage", "dynamic", 0.0)
    programs = int(3 * call)  # one program a second: three budgets in all
    for i in range(programs):
        slow.note("program", (1, i, programs), float(i))
        assert not slow.hung(i + 0.5, idle), i
    # The last program never ends: reported one budget after it began, as a hang.
    assert not slow.hung(programs - 1 + call - 0.5, idle)
    assert slow.hung(programs - 1 + call + 0.5, idle)
    line = slow.message(programs - 1 + call + 0.5)
    assert line.startswith("timed out after ") and "per kernel call" in line and "not hung" not in line

    endless = JobClock(budgets, None, now=0.0)
    endless.note("stage", "dynamic", 0.0)
    t = 0.0
    while not endless.hung(t, idle):  # a new launch every second, forever: cut at the slow limit
        endless.note("program", (int(t) + 1, 0, 1), t)
        t += 1.0
    assert SLOW_MULTIPLE * call - 1 <= t <= SLOW_MULTIPLE * call + 1
    assert "too slow, not hung" in endless.message(t)

    paced = JobClock(budgets, None, now=0.0)
    paced.note("stage", "correctness", 0.0)
    for i in range(int(call) + 1):  # 4096 programs at one a second: far beyond the slow limit
        paced.note("program", (1, i, 4096), float(i))
    assert paced.hung(call + 0.5, idle)
    line = paced.message(call + 0.5)
    assert line.startswith(f"timed out after {call + 0.5:.0f} s in reference correctness: too slow, not hung")
    assert f"of 4096 of the interpreter's launch; at this pace about {4096 - int(call):.0f} s more" in line
    assert f"{SLOW_MULTIPLE * call:.0f} s a kernel call that keeps moving may take" in line


def test_the_interpreters_grid_walk_is_reported_as_programs() -> None:
    from multiprocessing import Pipe

    import torch
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    from nodice.evaluation import heartbeat

    @triton.jit
    def copy_rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        tl.store(y_ptr + row * n + cols, tl.load(x_ptr + row * n + cols, mask=cols < n), mask=cols < n)

    builder = interpreter.interpreter_builder
    parent, child = Pipe()
    heartbeat._hook_interpreter_programs(heartbeat.Heartbeat(child))
    heartbeat._hook_interpreter_programs(heartbeat.Heartbeat(child))  # installed once
    try:
        x = torch.randn(3, 8)
        y = torch.empty_like(x)
        copy_rows[(3, 2)](x, y, 8, BLOCK=8)
        copy_rows[(1,)](x, y, 8, BLOCK=8)
    finally:
        del builder.set_grid_dim, builder.set_grid_idx  # the class's own methods again
    assert torch.equal(y[0], x[0])
    sent = []
    while parent.poll():
        sent.append(parent.recv())
    # At most one message a quarter of a second: the first program of the first launch, and maybe more.
    assert sent and sent[0] == ("program", (1, 0, 6))
    assert all(kind == "program" and 0 <= index < total for kind, (_, index, total) in sent)
