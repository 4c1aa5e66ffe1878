"""nodice as OpenEvolve's evaluator: the BI gate first, then the benchmark, diagnostics as artifacts.

The ``evaluator.py`` that ``nodice export openevolve`` writes delegates to
:class:`OpenEvolveEvaluator`. OpenEvolve's cascade calls

- ``evaluate_stage1(path)``: the gate (static BI analysis → correctness → dynamic
  BI validation). ``combined_score`` is 0 when the program is rejected and
  :data:`GATE_PASSED_SCORE` when it passes, above the cascade threshold
  :data:`CASCADE_THRESHOLD`, so only passing programs reach stage 2.
- ``evaluate_stage2(path)``: the benchmark of the same bytes; ``combined_score``
  becomes the geomean throughput in the task's unit (0 as soon as a workload is wrong).
- ``evaluate(path)``: gate and benchmark in one evaluation, when cascade evaluation is off.

Every result carries the verdict in its metrics and nodice's diagnostics in its
artifacts, which OpenEvolve shows the LLM when it next builds a prompt on this program.
The program runs in nodice's sandboxed worker; each process keeps one worker per
setting and reuses it while it stays healthy.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nodice.evaluation import Evaluation, Evaluator
from nodice.evaluation.evaluate import ISOLATIONS
from nodice.evolution.feedback import describe_check, describe_scores
from nodice.evolution.scores import score_dicts, standing_text

if TYPE_CHECKING:
    from openevolve.evaluation_result import EvaluationResult

VERDICTS = ("pass", "bi_violation", "incorrect", "cheat", "error")
# Stage 1's combined_score for a program that passed the gate; stage 2 replaces it with the throughput.
GATE_PASSED_SCORE = 1.0
CASCADE_THRESHOLD = 0.5
# What the LLM is shown of the worker's output when a program could not be judged.
LOG_TAIL_LINES = 40
# Findings and messages name the file OpenEvolve evaluated (a temporary copy) as this.
PROGRAM_LABEL = "program.py"
# Programs remembered between the two stages (OpenEvolve runs stage 2 right after stage 1).
GATED_KEPT = 64


@dataclass(frozen=True)
class EvaluatorSettings:
    """What the sandboxed evaluator is asked for; one worker per distinct setting in a process."""

    device: str | None = None
    isolation: str = "persistent"
    timeout_s: float | None = None


class _Sandboxes:
    """This process's evaluators, and the programs that passed stage 1 here (path → SHA-256).

    OpenEvolve re-executes ``evaluator.py`` for every cascade evaluation and runs
    its iterations in worker processes (forked on Linux), so the state lives here,
    in an imported module, and a forked child starts with none of its parent's
    workers (their pipes belong to the parent).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.evaluators: dict[EvaluatorSettings, Evaluator] = {}
        self.gated: dict[str, str] = {}

    def evaluator(self, settings: EvaluatorSettings) -> Evaluator:
        ev = self.evaluators.get(settings)
        if ev is None:
            ev = Evaluator(device=settings.device, isolation=settings.isolation, timeout_s=settings.timeout_s)
            self.evaluators[settings] = ev
        return ev

    def close(self) -> None:
        for ev in self.evaluators.values():
            ev.close()
        self.evaluators.clear()
        self.gated.clear()

    def forget(self) -> None:
        """After a fork: drop the parent's workers without stopping them."""
        self.lock = threading.Lock()
        self.evaluators = {}
        self.gated = {}


_SANDBOXES = _Sandboxes()
atexit.register(_SANDBOXES.close)
os.register_at_fork(after_in_child=_SANDBOXES.forget)


def close_evaluators() -> None:
    """Stop this process's sandboxed workers (they also stop when the process exits)."""
    with _SANDBOXES.lock:
        _SANDBOXES.close()


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


class OpenEvolveEvaluator:
    """OpenEvolve's evaluation functions for one nodice task (see the module docstring)."""

    def __init__(
        self,
        task: str,
        *,
        device: str | None = None,
        entry: str = "kernel",
        isolation: str = "persistent",
        timeout_s: float | None = None,
    ):
        if device not in (None, "cpu", "cuda"):
            raise ValueError(f"device must be 'cpu', 'cuda' or None, not {device!r}")
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        self.task = task
        self.entry = entry
        self.settings = EvaluatorSettings(device, isolation, timeout_s)

    def _evaluate(self, path: Path, *, bench: bool, bi: bool) -> Evaluation:
        with _SANDBOXES.lock:
            return _SANDBOXES.evaluator(self.settings).evaluate(
                path, self.task, bench=bench, entry=self.entry, static=bi, dynamic=bi
            )

    def evaluate_stage1(self, program_path: str) -> EvaluationResult:
        """The gate: static analysis, correctness, dynamic validation; nothing is benchmarked."""
        path = Path(program_path).absolute()
        ev = self._evaluate(path, bench=False, bi=True)
        _SANDBOXES.gated.pop(str(path), None)
        if ev.verdict == "pass":
            _SANDBOXES.gated[str(path)] = ev.sha256
            while len(_SANDBOXES.gated) > GATED_KEPT:
                _SANDBOXES.gated.pop(next(iter(_SANDBOXES.gated)))
        return evaluation_result(ev, path, scored=False, ran_gate=True)

    def evaluate_stage2(self, program_path: str) -> EvaluationResult:
        """The benchmark (correctness on every workload, throughput, baselines).

        The BI stages are not repeated for the bytes stage 1 just passed in this
        process; any other file (or one changed since) goes through the whole gate again.
        """
        path = Path(program_path).absolute()
        passed_sha = _SANDBOXES.gated.pop(str(path), None)
        already_gated = passed_sha is not None and passed_sha == _sha256(path)
        ev = self._evaluate(path, bench=True, bi=not already_gated)
        return evaluation_result(ev, path, scored=True, ran_gate=not already_gated)

    def evaluate(self, program_path: str) -> EvaluationResult:
        """Gate and benchmark in one evaluation (OpenEvolve without cascade evaluation)."""
        path = Path(program_path).absolute()
        return evaluation_result(self._evaluate(path, bench=True, bi=True), path, scored=True, ran_gate=True)


def metrics(ev: Evaluation, *, scored: bool) -> dict[str, float]:
    """OpenEvolve's metrics: ``combined_score``, the verdict (one flag per verdict) and the throughput.

    ``scored``: the evaluation included the benchmark, so ``combined_score`` is the
    geomean throughput; before it, a passing program holds :data:`GATE_PASSED_SCORE`.
    """
    passed = ev.verdict == "pass"
    throughput = ev.geomean if scored else 0.0
    combined = throughput if scored else (GATE_PASSED_SCORE if passed else 0.0)
    out = {"combined_score": float(combined), "gate_pass": float(passed)}
    out.update({f"verdict_{v}": float(ev.verdict == v) for v in VERDICTS})
    out["throughput"] = float(throughput)
    out["ratio_best_baseline"] = float((ev.ratio_best or 0.0) if scored else 0.0)
    return out


def artifacts(ev: Evaluation, path: Path, *, scored: bool, ran_gate: bool) -> dict[str, str]:
    """What the LLM reads next time: the verdict, the gate's diagnostics, the score, the log of a crash.

    The report is ``nodice_gate`` when the evaluation ran the BI stages (``ran_gate``),
    else ``nodice_benchmark`` (stage 2 after stage 1 passed the same bytes), so
    OpenEvolve's merge of the two stages keeps both; ``nodice_verdict`` is the latest word.
    """
    check = ev.check
    verdict = ev.verdict + (f" — {check.reason}" if check.reason else "")
    lines = describe_check(check)
    if scored and ev.scores:
        scores = score_dicts(ev.scores)
        lines += describe_scores(scores, ev.geomean)
        if ev.verdict == "pass":
            verdict += f" — geomean {standing_text(ev.geomean, ev.unit, ev.ratio_best)}"
    out = {"nodice_verdict": verdict, "nodice_gate" if ran_gate else "nodice_benchmark": "\n".join(lines)}
    if ev.verdict == "error" and ev.log.strip():
        out["nodice_log"] = "\n".join(ev.log.strip().splitlines()[-LOG_TAIL_LINES:])
    return {key: _relabel(text, path) for key, text in out.items()}


def _relabel(text: str, path: Path) -> str:
    """Name the evaluated file as the LLM knows it, not by its temporary path."""
    for spelling in {str(path), str(path.resolve())}:
        text = text.replace(spelling, PROGRAM_LABEL)
    return text


def evaluation_result(ev: Evaluation, path: Path, *, scored: bool, ran_gate: bool) -> EvaluationResult:
    from openevolve.evaluation_result import EvaluationResult

    return EvaluationResult(
        metrics=metrics(ev, scored=scored), artifacts=artifacts(ev, path, scored=scored, ran_gate=ran_gate)
    )
