"""One open run: evaluate workspace snapshots and commit them under the commit rule.

The commit rule: a version is committed only if it passes the whole gate
(static, correctness, dynamic) with a benchmark, and its geometric-mean
throughput is at least the best committed so far. A vanilla run (``--no-bi``, the baseline
that BI-aware search is compared against) skips the static and dynamic BI
stages, so its rule is correctness and speed only. Every path to a commit — the
built-in operator, an LLM's ``commit`` tool, ``nodice run commit`` from an
external agent — goes through :meth:`RunSession.commit`, so no agent can bypass
it. Geomeans are compared in one unit only: a run whose lineage was scored in
another (or as speedups, by an older nodice) is refused before anything is
evaluated.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nodice.errors import NodiceError
from nodice.evaluation.request import BenchOptions
from nodice.evolution.feedback import feedback_text, stage_verdicts
from nodice.evolution.journal import Attempt, Journal
from nodice.evolution.lineage import Lineage, VersionRecord
from nodice.evolution.rundir import KERNEL_FILE, RunConfig, RunDir
from nodice.evolution.scores import (
    ratio_best_of,
    refuse_incomparable,
    score_dicts,
    standing_text,
    task_unit,
    unit_of,
    value_text,
)

if TYPE_CHECKING:
    from nodice.evaluation import Evaluation, Evaluator
    from nodice.evaluation.executor import ExecutorConfig

# Rejections that stop a candidate whatever its speed.
GATE_REJECTIONS = ("bi_violation", "incorrect", "cheat", "error")


class BudgetExhausted(NodiceError):
    kind = "budget exhausted"


@dataclass
class CommitResult:
    committed: bool
    message: str
    attempt: Attempt | None = None
    version: VersionRecord | None = None


@dataclass
class Candidate:
    """A snapshot to judge and who made it; ``commit_if_eligible`` commits it when the rule allows."""

    files: dict[str, str]
    agent: str
    label: str = ""
    description: str = ""
    bench: bool = True
    commit_if_eligible: bool = False
    # Its mark in ``scratch/inflight`` while it is judged (evaluations of other processes count too).
    reservation: Path | None = None
    # The files of the version it must match bit for bit before it is timed (a knob setting).
    same_bits_as: dict[str, str] | None = None


def files_digest(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


class RunSession:
    """Evaluation and commits for one run directory; shared by the engine and ``nodice run``."""

    def __init__(
        self,
        run: RunDir,
        config: RunConfig,
        evaluator: Evaluator | None = None,
        executor: ExecutorConfig | None = None,
    ):
        self.run = run
        self.executor = executor
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[Future[tuple[Evaluation, float, float]], Candidate] = {}
        self.config = config
        self.journal = Journal(run.store_path)
        self.lineage = Lineage(run.root)
        self._evaluator = evaluator
        self._owns_evaluator = evaluator is None
        self.direction = ""
        self._unit = config.unit
        # Called as listener(event, attempt) with event "attempt" or "commit".
        self.listeners: list[Callable[[str, Attempt], None]] = []
        # Called with an evaluation's label when it starts (the live view shows it).
        self.on_evaluation_start: Callable[[str], None] | None = None

    def _notify(self, event: str, attempt: Attempt) -> None:
        for listener in self.listeners:
            listener(event, attempt)

    # ---- evaluator -----------------------------------------------------------
    @property
    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            from nodice.evaluation import Evaluator

            self._evaluator = Evaluator(
                device=self.config.device,
                isolation="persistent",
                store=str(self.run.store_path),
                executor=self.executor,
            )
        return self._evaluator

    @property
    def workers(self) -> int:
        """Evaluations this session can have in flight at once (what the executor could get)."""
        if self._evaluator is None and (self.executor is None or self.executor.workers == 1):
            return 1
        return int(getattr(self.evaluator, "workers", 1))

    def release_evaluator(self) -> None:
        """End this session's workers now (a later evaluation starts them again)."""
        if self._evaluator is not None and self._owns_evaluator:
            self._evaluator.close()
            self._evaluator = None

    def close(self) -> None:
        if self._pool is not None:
            # Unrecorded evaluations (an abort) are lost like an evaluation in progress at a kill; closing
            # the evaluator below ends their workers.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            self._pending.clear()
        if self._evaluator is not None and self._owns_evaluator:
            self._evaluator.close()
        self._evaluator = None
        self.journal.close()

    # ---- lineage views -------------------------------------------------------------
    @property
    def unit(self) -> str:
        """The unit every score of this run is in: the task's (TFLOP/s or GB/s)."""
        if self._unit is None:
            self._unit = task_unit(self.config.task)
        return self._unit

    def check_comparable(self, versions: list[VersionRecord] | None = None) -> None:
        """Refuse to go on when a committed version was scored in another unit than the task's."""
        versions = self.versions() if versions is None else versions
        refuse_incomparable(str(self.run.root), [v.unit for v in versions], self.unit)

    def versions(self) -> list[VersionRecord]:
        return self.lineage.versions()

    def best(self) -> VersionRecord | None:
        """The latest committed version; by the commit rule it is also the fastest."""
        versions = self.versions()
        return versions[-1] if versions else None

    def best_files(self) -> dict[str, str]:
        """Sources of the best version (the seed commit when nothing passed yet)."""
        best = self.best()
        rev = best.sha if best else self.lineage.root_commit()
        listing = self.lineage.git("ls-tree", "-r", "--name-only", rev, "--", "workspace").split()
        return {p.removeprefix("workspace/"): self.lineage.show(rev, p) for p in listing}

    # ---- budget -----------------------------------------------------------------------
    def evaluations_done(self) -> int:
        return self.journal.count()

    def own_evaluations(self) -> int:
        """Evaluations of this session's island (of the whole run without islands)."""
        if self.run.island is None:
            return self.evaluations_done()
        return self.journal.count_by_island().get(self.run.island, 0)

    def evaluations_left(self) -> int | None:
        if self.config.budget is None:
            return None
        return max(0, self.config.budget - self.evaluations_done())

    # ---- evaluate -----------------------------------------------------------------------
    def evaluate(
        self,
        *,
        agent: str,
        label: str = "",
        description: str = "",
        bench: bool = True,
        files: dict[str, str] | None = None,
        commit_if_eligible: bool = False,
        same_bits_as: dict[str, str] | None = None,
    ) -> Attempt:
        """Judge ``files`` (default: the workspace) and record the attempt; commit it if asked and allowed.

        ``same_bits_as``: the files of a version whose outputs the candidate must match bit for bit
        before it is timed; one that does not is recorded as ``bits_differ``, untimed.
        """
        files = self.run.workspace_files() if files is None else files
        c = Candidate(files, agent, label, description, bench, commit_if_eligible)
        c.same_bits_as = same_bits_as
        with self.run.writing():  # admitted and marked in flight at once: islands share the budget
            self._admit(c)
            c.reservation = self.run.reserve_evaluation()
        try:
            ev, elapsed, _ = self._judge(c)
            return self._record(c, ev, elapsed)
        finally:
            if c.reservation.exists():  # not recorded: an error or an abort
                with self.run.writing():
                    self.run.release_evaluation(c.reservation)

    def _admit(self, c: Candidate) -> None:
        """Refuse a candidate the budget (counting evaluations in flight anywhere) or the run cannot take."""
        left = self.evaluations_left()
        if left is not None and left - len(self._pending) - self.run.evaluations_in_flight() <= 0:
            raise BudgetExhausted(f"all {self.config.budget} evaluations of the budget are spent")
        if KERNEL_FILE not in c.files:
            kernel = self.run.workspace / KERNEL_FILE
            why = "is not UTF-8 text" if kernel.is_file() else "is missing"
            raise NodiceError(f"the workspace's {KERNEL_FILE} {why}")
        self.check_comparable()
        if self.on_evaluation_start is not None:
            self.on_evaluation_start(c.label or "edit")

    # ---- evaluations in flight (several workers) -------------------------------------------
    @property
    def in_flight(self) -> list[Candidate]:
        """Candidates started and not yet recorded."""
        return list(self._pending.values())

    def start(self, c: Candidate) -> None:
        """Start judging ``c`` on a free worker (it waits for one when all are busy); returns at once.

        :meth:`finish_next` records it. The budget counts it from now on.
        """
        self._admit(c)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="nodice-eval")
        self._pending[self._pool.submit(self._judge, c)] = c

    def finish_next(self) -> list[Attempt]:
        """Wait until at least one started evaluation is over; record (and commit) each that is, in turn.

        Recording is serialised here, in the caller's thread, so the commit rule sees every earlier commit.
        """
        if not self._pending:
            return []
        done, _ = wait(list(self._pending), return_when=FIRST_COMPLETED)
        attempts = []
        for future in sorted(done, key=lambda f: f.result()[2]):
            c = self._pending.pop(future)
            ev, elapsed, _ = future.result()
            attempts.append(self._record(c, ev, elapsed))
        return attempts

    def drain(self) -> list[Attempt]:
        """Record every evaluation still in flight (at the end of a run, or before a stop)."""
        attempts: list[Attempt] = []
        while self._pending:
            attempts += self.finish_next()
        return attempts

    def _judge(self, c: Candidate) -> tuple[Evaluation, float, float]:
        """Evaluate a private snapshot of the candidate's files (from any thread).

        Returns the evaluation, its seconds, and when it ended (for recording in order of completion).
        """
        snapshot = self.run.snapshot(c.files)
        best = self.run.snapshot(c.same_bits_as) if c.same_bits_as else None
        same_bits_as = str(best / KERNEL_FILE) if best else ""
        t0 = time.perf_counter()
        try:
            ev = self.evaluator.evaluate(
                str(snapshot / KERNEL_FILE),
                self.config.task,
                bench=c.bench,
                entry=self.config.entry,
                run_id=self.config.run_id,
                # The vanilla baseline judges correctness and speed only: no BI stage runs.
                static=self.config.bi,
                dynamic=self.config.bi,
                # The host lines each workload runs tell the built-in agent which parameters matter.
                bench_options=BenchOptions(
                    workloads=tuple(self.config.workloads or ()), host_lines=True, same_bits_as=same_bits_as
                ),
            )
        finally:
            shutil.rmtree(snapshot, ignore_errors=True)
            if best is not None:
                shutil.rmtree(best, ignore_errors=True)
        end = time.perf_counter()
        # Findings name the workspace's files, not the snapshot that is gone by now.
        for finding in ev.check.findings:
            path = Path(finding.file)
            if path.is_relative_to(snapshot):
                finding.file = path.relative_to(snapshot).as_posix()
        return ev, end - t0, end

    def _record(self, c: Candidate, ev: Evaluation, elapsed: float) -> Attempt:
        """Journal the attempt against the best committed now; commit it when asked and allowed."""
        bench = c.bench
        scores = score_dicts(list(ev.scores))
        geomean = float(ev.geomean) if ev.verdict == "pass" and bench else 0.0
        best_version = self.best()
        best = best_version.geomean if best_version else 0.0
        outcome = self._outcome(ev.verdict, bench, geomean, best)
        if ev.verdict == "pass" and stage_verdicts(ev.check).get("same_bits") == "reject":
            outcome = "bits_differ"  # another kernel than the version it was to speed up: not timed
        if outcome == "eligible" and c.commit_if_eligible:
            outcome = "committing"  # reconciled into a commit if the process dies before git has it
        check = ev.check
        attempt = Attempt(
            id=0,
            created=time.time(),
            agent=c.agent,
            label=c.label or "edit",
            description=c.description,
            files_sha=files_digest(c.files),
            files=c.files,
            bench=bench,
            verdict=ev.verdict,
            reason=check.reason or (check.error or ""),
            geomean=geomean,
            scores=scores,
            stages=stage_verdicts(check),
            feedback=feedback_text(
                check, scores, geomean, outcome, best, best_version.unit if best_version else self.unit
            ),
            outcome=outcome,
            best_before=best,
            direction=self.direction,
            elapsed_s=round(elapsed, 3),
            island=self.run.island,
            check=check.to_dict(),
        )
        with self.run.writing():
            self.journal.add_attempt(attempt)
            if c.reservation is not None:  # recorded: the journal counts it from now on
                self.run.release_evaluation(c.reservation)
        if outcome == "committing":
            self.commit_attempt(attempt)
        self._notify("attempt", attempt)
        return attempt

    @staticmethod
    def _outcome(verdict: str, bench: bool, geomean: float, best: float) -> str:
        if verdict != "pass":
            return verdict if verdict in GATE_REJECTIONS else "error"
        if not bench:
            return "gate_only"
        if geomean > 0 and geomean >= best:
            return "eligible"
        return "slower"

    # ---- commit -----------------------------------------------------------------------
    def commit(
        self, *, agent: str, description: str = "", files: dict[str, str] | None = None
    ) -> CommitResult:
        """Commit ``files`` (default: the workspace) if they pass the commit rule.

        Sources never benchmarked are evaluated first (one evaluation of the budget);
        sources already judged are not judged again, so a rejection stays a rejection.
        """
        files = self.run.workspace_files() if files is None else files
        prior = self.journal.latest_for(files_digest(files))
        if prior is not None and prior.outcome == "committed":
            return CommitResult(False, f"this source is already version v{prior.version}", prior)
        if prior is not None and prior.outcome in (*GATE_REJECTIONS, "bits_differ"):
            return CommitResult(False, f"refused: attempt #{prior.id} was rejected\n{prior.feedback}", prior)
        if prior is None or not prior.bench:
            prior = self.evaluate(agent=agent, label="commit", description=description, files=files)
        if description:
            prior.description = description  # the commit message is the deliberate one
        return self.commit_attempt(prior)

    def commit_attempt(self, attempt: Attempt) -> CommitResult:
        """Commit a judged attempt if it still meets the rule (another commit may have raised the bar)."""
        if attempt.verdict != "pass" or not attempt.bench or attempt.outcome == "bits_differ":
            why = "was rejected" if attempt.verdict != "pass" else "has no benchmark"
            if attempt.outcome == "bits_differ":
                why = "changes the best version's bits (not timed)"
            return CommitResult(False, f"refused: attempt #{attempt.id} {why}\n{attempt.feedback}", attempt)
        with self.run.writing():
            existing = self.lineage.find_attempt(attempt.id)
            if existing is not None:
                self._mark_committed(attempt, existing)
                return CommitResult(True, f"attempt #{attempt.id} was already committed", attempt)
            versions = self.versions()
            unit = unit_of(attempt.scores) or self.unit
            refuse_incomparable(str(self.run.root), [v.unit for v in versions], unit)
            best = versions[-1].geomean if versions else 0.0
            if attempt.geomean <= 0 or attempt.geomean < best:
                self.journal.set_outcome(attempt.id, "slower")
                attempt.outcome = "slower"
                return CommitResult(
                    False,
                    f"refused: geomean {value_text(attempt.geomean, unit)} is below the best committed "
                    f"{value_text(best, unit)}",
                    attempt,
                )
            record = VersionRecord(
                version=(versions[-1].version + 1) if versions else 0,
                attempt=attempt.id,
                geomean=attempt.geomean,
                verdict=attempt.verdict,
                stages=attempt.stages,
                scores=attempt.scores,
                description=attempt.description or attempt.label,
                agent=attempt.agent,
                created=time.time(),
                parent_version=versions[-1].version if versions else None,
                files=sorted(attempt.files),
                unit=unit,
                ratio_best=ratio_best_of(attempt.scores),
                island=attempt.island,
            )
            # The tracked workspace, whichever island's folder the agent edits.
            home = self.run.home
            current = home.workspace_files()
            home.write_workspace(attempt.files)
            self.lineage.commit_version(record, best)
            self._mark_committed(attempt, record.sha, record.version)
            self._notify("commit", attempt)
            if current != attempt.files and current and home is self.run:
                # The agent kept editing after this snapshot: give it its work back, uncommitted.
                home.write_workspace(current)
        standing = standing_text(record.geomean, record.unit, record.ratio_best)
        return CommitResult(True, f"committed v{record.version} (geomean {standing})", attempt, record)

    def _mark_committed(self, attempt: Attempt, sha: str, version: int | None = None) -> None:
        if version is None:
            rec = next((v for v in self.versions() if v.sha == sha), None)
            version = rec.version if rec else -1
        self.journal.mark_committed(attempt.id, version, sha)
        attempt.outcome, attempt.version, attempt.sha = "committed", version, sha

    # ---- reconcile ------------------------------------------------------------------------
    def reconcile(self) -> list[str]:
        """Make the journal and git agree after any stop; returns what was repaired."""
        with self.run.writing():
            notes = [f"removed stale git lock {p}" for p in self.lineage.clear_stale_locks()]
            in_git = {v.attempt: v for v in self.versions()}
        attempts = {a.id: a for a in self.journal.attempts()}
        for a in attempts.values():
            if a.id in in_git and a.outcome != "committed":
                self._mark_committed(a, in_git[a.id].sha, in_git[a.id].version)
                notes.append(f"attempt #{a.id} is v{a.version} in git: journal updated")
            elif a.outcome == "committing":
                result = self.commit_attempt(a)
                notes.append(f"attempt #{a.id} was being committed: {result.message}")
        for v in in_git.values():
            source = attempts.get(v.attempt)
            if not v.noted and source is not None:
                v.scores, v.stages, v.created = source.scores, source.stages, source.created
                v.description = source.description or v.description
                with self.run.writing():
                    self.lineage.add_note(v.sha, v.to_dict())
                notes.append(f"v{v.version}: git note restored from the store")
        self.run.clear_scratch()
        return notes
