"""How long one step of an evaluation may take before the worker counts as hung.

A hang is a step that does not end, so the limit is set per step, not per
evaluation: each kernel call (and each chunk of timed calls) must return within
the *call budget*, the candidate's import within the *import budget*, and the
harness's own steps (static analysis, library baselines) within theirs. A slow
stage made of many calls (the CPU interpreter over every BI context, a GPU
benchmark of 26 attention workloads) is never cut for being long, while a
kernel that loops forever is reported after one call budget.

The call budget is 12 times the slowest step the task's seed takes in the gate
and benchmark on that device (``SEED_SLOWEST_CALL_S``: one kernel call with
the harness's work around it, inputs and references), and at least 20 s. The
floor covers what any first call may pay once (library initialisation, lazy
module loading) and leaves a kernel tens of times slower than a quick seed;
the multiple lets a task whose seed is slow (attention prefill under the CPU
interpreter: 2.5 s a step) keep that margin over machine load (a shared host
stretches a step threefold) and over a candidate slower than the seed, while a
hang is still reported within about half a minute. A reference file (KernelBench's
``Model``) has no seed: its own first step (the file's import, ``get_inputs()`` at the
problem's size and one ``Model`` call) is timed as the job begins, and the call
budget is the same multiple of it where that is more than the floor (a problem whose
inputs are several GB takes seconds a step before any kernel runs). Compilation is not a
call's work: the clock stops while Triton compiles (``COMPILE_S`` per kernel)
and while a compiler process (a native build through ``load_inline``,
FlashInfer's JIT) runs in the worker's process group (``COMPILER_CAP_S`` per
step).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import NamedTuple

from nodice.gate.progress import StepKind

CALL_MULTIPLE = 12.0
CALL_FLOOR_S = 20.0
# Module-level code of a candidate: imports and table building, not kernels.
IMPORT_S = 30.0
# The harness reading the candidate's source (static guards and static BI analysis).
STATIC_S = 60.0
# Library baselines: their import, JIT build and BI audit, and each one's first call on a workload.
HARNESS_S = 600.0
# One Triton compilation (the clock of the call it happens in stops meanwhile).
COMPILE_S = 120.0
# How long a step may wait on a running compiler process, in all.
COMPILER_CAP_S = 600.0
# No evaluation runs longer, whatever its steps report.
JOB_CAP_S = 1800.0

# The seed's slowest step (seconds) over the gate and the benchmark: the median over three runs
# of `bench/seed_call_times.py` on a 2-core CPU shared with other jobs (Triton's interpreter).
# On the H200 every seed call takes milliseconds (a whole steady gate takes 0.1-6.4 s,
# lab/results/gpu_check_examples_dynamic_log.txt), so the floor governs there; a task
# missing from the table gets the floor too.
SEED_SLOWEST_CALL_S: dict[str, dict[str, float]] = {
    "cpu": {
        "rmsnorm": 0.54,
        "add_rmsnorm": 0.47,
        "gemm": 0.82,
        "attention_prefill": 2.54,
        "attention_decode": 0.56,
        "moe": 0.64,
        "sampling": 0.55,
        "gdn": 0.40,
        "kda": 1.35,
    },
}

_STAGES = {
    "static": "static analysis",
    "baselines": "loading the library baselines",
    "load": "the candidate's import",
    "reference": "reading the reference file",
    "applicability": "checking that the reference gives each sample an output of its own",
    "guards": "the anti-cheat probes",
    "correctness": "reference correctness",
    "dynamic": "dynamic validation",
    "health": "the worker's health check",
}


def stage_name(stage: str) -> str:
    """The stage as the timeout message names it (``bench:<workload>`` is a benchmark workload)."""
    if stage.startswith("bench:"):
        return f"benchmark workload {stage.removeprefix('bench:')}"
    return _STAGES.get(stage, stage)


class StepBudget(NamedTuple):
    seconds: float
    basis: str  # the words that explain it, for the timeout message
    per_call: bool  # a kernel call's budget (not the import's or the harness's)


@dataclass(frozen=True)
class Budgets:
    """The step budgets of one task on one device (seconds), with the reason for each."""

    task: str
    device: str
    call_s: float
    seed_call_s: float | None = None
    reference_step_s: float | None = None  # a reference file's own first step, timed
    import_s: float = IMPORT_S
    static_s: float = STATIC_S
    harness_s: float = HARNESS_S
    compile_s: float = COMPILE_S
    compiler_cap_s: float = COMPILER_CAP_S
    job_cap_s: float = JOB_CAP_S

    @classmethod
    def for_task(cls, task: str, device: str) -> Budgets:
        seed = SEED_SLOWEST_CALL_S.get(device, {}).get(task)
        call = CALL_FLOOR_S if seed is None else max(CALL_FLOOR_S, CALL_MULTIPLE * seed)
        return cls(task, device, float(math.ceil(call)), seed)

    def with_reference_step(self, seconds: float) -> Budgets:
        """These budgets once the reference file's own first step took ``seconds``."""
        call = max(self.call_s, float(math.ceil(CALL_MULTIPLE * seconds)))
        return dataclasses.replace(self, call_s=call, reference_step_s=seconds)

    def _call_basis(self) -> str:
        if self.reference_step_s is not None and CALL_MULTIPLE * self.reference_step_s > CALL_FLOOR_S:
            return (
                f"budget {self.call_s:.0f} s per kernel call, {CALL_MULTIPLE:.0f}x the reference's own first "
                f"step ({self.reference_step_s:.1f} s: its import, get_inputs() and one Model call)"
            )
        if self.seed_call_s is None:
            return f"budget {self.call_s:.0f} s per kernel call, the minimum"
        scaled = CALL_MULTIPLE * self.seed_call_s
        origin = f"{CALL_MULTIPLE:.0f}x the slowest step of the {self.task} seed on {self.device}"
        if scaled >= CALL_FLOOR_S:
            return f"budget {self.call_s:.0f} s per kernel call, {origin}"
        return f"budget {self.call_s:.0f} s per kernel call, the minimum; {origin} is {scaled:.0f} s"

    def step(self, stage: str, kind: StepKind) -> StepBudget:
        """The budget of one step of ``stage``."""
        if stage == "static":
            basis = f"budget {self.static_s:.0f} s for the harness's static analysis"
            return StepBudget(self.static_s, basis, False)
        if stage == "reference":
            basis = (
                f"budget {self.import_s:.0f} s for the reference file's import, its get_inputs() "
                "and one Model call"
            )
            return StepBudget(self.import_s, basis, False)
        if stage == "applicability":
            basis = f"budget {self.harness_s:.0f} s for each float64 call of the reference"
            return StepBudget(self.harness_s, basis, False)
        if stage == "load":
            basis = f"budget {self.import_s:.0f} s for the candidate's module-level code"
            return StepBudget(self.import_s, basis, False)
        if stage == "baselines" or kind == "harness":
            basis = f"budget {self.harness_s:.0f} s for a library baseline's build or first call"
            return StepBudget(self.harness_s, basis, False)
        return StepBudget(self.call_s, self._call_basis(), True)
