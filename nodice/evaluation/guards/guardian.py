"""The runtime guards around one loaded candidate: a watched call, and probes run once after loading.

The :class:`Guardian` is the gate's ``guard`` hook. It checks the harness after
the import, wraps the kernel so that every later call (gate and benchmark) is
watched for library calls, harness changes and fake outputs, then runs the
probes that need dedicated calls: input mutation, late writes, background
threads, stale memory, precision and address-keyed caches. A violation raises
:class:`CheatDetected` and is remembered, so it survives the gate turning
exceptions raised inside a kernel call into crash reports.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import torch

from nodice.errors import interrupts_are_raised
from nodice.evaluation.guards import (
    background_thread,
    cached_output,
    fake_output,
    harness_tampering,
    input_mutation,
    library_call,
    precision_downgrade,
    uninitialised_memory,
    unsynchronized_work,
)
from nodice.evaluation.guards.bits import same_bits
from nodice.gate import progress
from nodice.gate.correctness import compare, has_own_correctness
from nodice.gate.execute import check_layout, check_output, expected_outputs, poison_allocator
from nodice.gate.result import CheatDetected
from nodice.loader import Candidate
from nodice.tasks.base import Output, Task


class _ProbeStop(Exception):
    """The kernel failed in a way the gate reports better (crash, bad output, wrong values)."""


class Guardian:
    def __init__(self, task: Task, device: torch.device, dtype: torch.dtype, seed: int):
        self.task, self.device, self.dtype, self.seed = task, device, dtype, seed
        library_call.install_reference_tripwire(task)
        self.watch = library_call.LibraryWatch(library_call.forbidden_for(task))
        self.violation: CheatDetected | None = None
        self.first_call_ms: float | None = None
        self.raw: Callable[..., Any] | None = None
        # Set by a probe: copy the next call's output the instant it returns, into ``early``.
        self.snapshot_next = False
        self.early: list[torch.Tensor] = []
        self.guarded: Callable[..., Any] | None = None
        self._modules_before = set(sys.modules)
        # Threads of the process before the candidate exists: any new one left at the end is its.
        self._census_at_load = background_thread.ThreadCensus(native=True)
        # Taken before the candidate is imported: everything after is the candidate's doing.
        self.harness = harness_tampering.HarnessSnapshot.take()
        self.hot_check = harness_tampering.HotCheck(self.harness)

    # ---- verdicts ------------------------------------------------------------
    def fail(self, rule: str, detail: str) -> NoReturn:
        exc = CheatDetected(rule, detail)
        if self.violation is None:
            self.violation = exc
        raise exc

    def check_harness(self, when: str, hot: bool = False) -> None:
        if hot:
            changes = self.hot_check.changes()
        else:
            changes = self.harness.changes(harness_tampering.HarnessSnapshot.take())
        if changes:
            self.fail(harness_tampering.RULE, f"{when}: " + "; ".join(changes[:3]))

    # ---- the watched call ------------------------------------------------------
    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        names = self.task.output_names

        @functools.wraps(fn)
        def guarded(*args: Any) -> Any:
            if self.violation is not None:
                raise self.violation
            self.watch.hits.clear()
            with library_call.watching(self.watch):
                out = fn(*args)
            if self.snapshot_next:
                # Before any other check: work left on a side stream has the least time to land.
                self.snapshot_next = False
                self.early = unsynchronized_work.snapshot(out)
            if self.watch.hits:
                self.fail(library_call.RULE, f"the kernel called {self.watch.hits[0]}")
            self.check_harness("during a call", hot=True)
            reason = fake_output.fake_tensor_reason(out, names)
            if reason:
                self.fail(fake_output.RULE, reason)
            # A wrong shape, dtype, type or layout is a bad output (the candidate cannot be judged), not a
            # cheat; shared memory is, and overlap is looked for before the layout, which it also breaks.
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
            outs = check_output(self.task, out, expected_outputs(self.task, args), device)
            reason = fake_output.overlap_reason(outs, names)
            if reason:
                self.fail(fake_output.RULE, reason)
            check_layout(self.task, outs)
            reason = fake_output.alias_reason(outs, args, names, self.task.input_label)
            if reason:
                self.fail(fake_output.RULE, reason)
            return out

        return guarded

    # ---- the gate's guard hook ---------------------------------------------------
    def __call__(self, cand: Candidate) -> Candidate:
        self.check_harness("while importing the candidate")
        libs = library_call.new_library_modules(self._modules_before, set(sys.modules), self.task)
        if libs:
            self.fail(library_call.RULE, f"importing the candidate loaded {', '.join(libs)}")
        self.raw = cand.fn
        self.guarded = self.wrap(cand.fn)
        self.run_probes(self.guarded)
        return dataclasses.replace(cand, fn=self.guarded)

    # ---- probes --------------------------------------------------------------
    def _call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], spec: Any, snapshot: bool = False
    ) -> Output:
        poison_allocator(self.device, spec)
        self.snapshot_next, self.early = snapshot, []
        progress.step()
        try:
            out = fn(*args)
        except CheatDetected:
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and not interrupts_are_raised():
                raise
            raise _ProbeStop from None
        try:
            outs = check_output(self.task, out, spec, self.device)
        except Exception:
            raise _ProbeStop from None
        return outs if len(outs) > 1 else outs[0]

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _agrees(self, out: Output, ref: Output) -> bool:
        return compare(self.task, out, ref, self.dtype)[0]

    def _check_settled(
        self, out: Output, early: list[torch.Tensor], stream: Any, census: background_thread.ThreadCensus
    ) -> None:
        """Output copied the instant the call returned, compared once everything has settled; then threads."""
        late = unsynchronized_work.settled_difference(out, early, stream, census.join_new)
        if late:
            self.fail(unsynchronized_work.RULE, late)
        threads = census.new_threads()
        if threads:
            self.fail(background_thread.RULE, threads)

    def run_probes(self, fn: Callable[..., Any]) -> None:
        try:
            self._probes(fn)
        except _ProbeStop:
            return  # the gate's own stages reproduce the failure with a precise message

    def _probes(self, fn: Callable[..., Any]) -> None:
        task, own_rule = self.task, has_own_correctness(self.task)
        gen = torch.Generator().manual_seed(self.seed * 31 + 17)
        problem = task.problem(gen, self.device, self.dtype)
        batches = task.correctness_batches(self.device)
        batch = batches[1] if len(batches) > 1 else batches[0]
        args = task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen)
        spec = expected_outputs(task, args)
        ref = task.reference(*args)
        originals = input_mutation.copies(args)

        # First call: JIT compilation and warm-up; Python threads it leaves behind already count.
        census = background_thread.ThreadCensus(native=False)
        stream = torch.cuda.current_stream() if self.device.type == "cuda" else None
        t0 = time.perf_counter()
        out1 = self._call(fn, args, spec, snapshot=True)
        early = self.early or unsynchronized_work.snapshot(out1)
        self._sync()
        self.first_call_ms = (time.perf_counter() - t0) * 1e3
        self._check_settled(out1, early, stream, census)
        if not own_rule:
            # Before the tolerance check: a downgraded kernel is often just outside the tolerance too.
            def rerun(other: tuple[Any, ...]) -> Output | None:
                try:
                    return self._call(fn, other, expected_outputs(task, other))
                except _ProbeStop:
                    return None

            downgrade = precision_downgrade.judge(task, args, out1, ref, self.dtype, rerun=rerun)
            if downgrade:
                self.fail(precision_downgrade.RULE, downgrade)
            if not self._agrees(out1, ref):
                raise _ProbeStop
        changed = input_mutation.mutated(args, originals, task.input_label)
        if changed:
            self.fail(input_mutation.RULE, changed)
        first_bits = tuple(t.clone() for t in (out1 if isinstance(out1, tuple) else (out1,)))

        # Second call, after the warm-up: now native threads count too (libraries start their pools early).
        census = background_thread.ThreadCensus(native=True)
        out2 = self._call(fn, args, spec, snapshot=True)
        self._check_settled(out2, self.early or unsynchronized_work.snapshot(out2), stream, census)

        # Third call, same inputs, freed blocks poisoned: a correct result cannot come from stale memory.
        del out1, out2
        out3 = self._call(fn, args, spec)
        self._sync()
        outs3 = out3 if isinstance(out3, tuple) else (out3,)
        stale = (
            (not self._agrees(out3, ref))
            if not own_rule
            else not all(same_bits(a, b) for a, b in zip(first_bits, outs3, strict=True))
        )
        if stale:
            self.fail(
                uninitialised_memory.RULE,
                "correct on the first call, wrong on the same inputs once freed memory was poisoned",
            )
        threads = self._census_at_load.new_threads()
        if threads:
            self.fail(background_thread.RULE, threads)
        if own_rule:
            return

        # Fourth call: new values at the same addresses.
        del out3, outs3
        try:
            fresh = task.compose(problem, [task.sample(problem, gen) for _ in range(batch)], gen)
        except Exception:
            fresh = None  # the task cannot draw again here: scaled noise for every input
        cached_output.refill_in_place(args, gen, fresh)
        del fresh
        ref_new = task.reference(*args)
        out4 = self._call(fn, args, spec)
        self._sync()
        if not self._agrees(out4, ref_new):
            self.fail(
                cached_output.RULE,
                "correct for the first inputs, wrong once new values were written to the same addresses",
            )
