"""The Evaluator: judge and score untrusted candidates, one sandboxed worker at a time.

    with Evaluator(isolation="persistent", store="runs/evals.sqlite") as ev:
        e = ev.evaluate("kernel.py", "rmsnorm")
        print(e.verdict, e.geomean)

A bad candidate never raises: it comes back as an :class:`Evaluation` with
verdict ``error`` (crash, hang, out of memory, unloadable) or ``cheat``, and the
evaluator carries on with a fresh worker.

With ``executor=ExecutorConfig(kind, workers)`` it keeps N workers, locally or
on a Ray cluster (:mod:`nodice.evaluation.executor`); :meth:`Evaluator.evaluate`
may then be called from N threads at once (:meth:`Evaluator.evaluate_many`
does that), and every result still lands in the one store.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from nodice.evaluation.executor import Executor, ExecutorConfig, LocalExecutor
from nodice.evaluation.limits import Limits
from nodice.evaluation.record import Evaluation
from nodice.evaluation.request import BenchOptions, EvaluationRequest
from nodice.evaluation.workers import JobOutcome
from nodice.gate.result import CheckResult
from nodice.measuring.score import WorkloadScore

# isolated: a fresh worker process per candidate; persistent: one reused while healthy; inline: this
# process (no time or memory limit, nothing between the candidate and the caller: for debugging a
# kernel, and for static analysis, which runs none of its code).
ISOLATIONS = ("isolated", "persistent", "inline")


_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def hang_site(log: str, candidate: Path) -> str:
    """``file:line in function``: the innermost frame of the candidate's own files in a hung worker's stacks.

    The stacks are faulthandler's, innermost frame first, written to the worker's output on SIGUSR1.
    """
    folder = candidate.expanduser().absolute().parent
    harness = Path(__file__).resolve().parents[1]
    for path, line, function in _FRAME.findall(log):
        where = Path(path)
        if where.is_relative_to(folder) and not where.is_relative_to(harness):
            return f"{where.name}:{line} in {function}"
    return ""


def innermost_frame(log: str) -> str:
    """``…/file:line in function``: the innermost frame of the thread faulthandler calls current (the
    worker's main thread, which runs the kernel calls), for a hang outside the candidate's files."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", log)
    current = [b for b in blocks if b.lstrip().startswith("Current thread")]
    for block in current[-1:] or blocks[-1:]:
        frames = _FRAME.findall(block)
        if frames:
            path, line, function = frames[0]
            return f"{'/'.join(Path(path).parts[-3:])}:{line} in {function}"
    return ""


def make_executor(config: ExecutorConfig, isolation: str, device: str | None, limits: Limits) -> Executor:
    """The workers ``config`` asks for: local ones, or one per slot of a Ray cluster (imported only then)."""
    config.validate()
    if config.kind == "ray":
        from nodice.evaluation.ray_executor import RayExecutor

        return RayExecutor(isolation, device, limits, config.workers, config.ray_address)
    return LocalExecutor(isolation, device, limits, config.workers)


def _read(path: Path) -> tuple[str, str]:
    """Source and sha256 of the candidate (empty when unreadable: the worker reports why)."""
    try:
        data = path.read_bytes()
    except OSError:
        return "", ""
    return data.decode("utf-8", "replace"), hashlib.sha256(data).hexdigest()


class Evaluator:
    """Runs the gate, the anti-cheat guards and the benchmark on candidates in a sandbox.

    ``isolation="isolated"`` starts a fresh worker per candidate (safest);
    ``"persistent"`` reuses one while it stays healthy (fast); ``"inline"`` runs the
    same request in this process (``nodice check --no-sandbox``, ``--static-only``). ``timeout_s``
    ``None`` gives every step of an evaluation the task's budget
    (:mod:`nodice.evaluation.budgets`), so a hang is reported within one step's
    budget; a number replaces the budgets with one limit on the whole
    evaluation. ``store`` is a SQLite path where every evaluation is recorded;
    ``None`` records nothing. ``executor``: where the workers run and how many
    (default: one local worker).
    """

    def __init__(
        self,
        device: str | None = None,
        isolation: str = "isolated",
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        store: str | Path | None = None,
        executor: ExecutorConfig | None = None,
    ):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        if device not in (None, "cpu", "cuda"):
            raise ValueError(f"device must be 'cpu', 'cuda' or None, not {device!r}")
        self.device = device
        self.isolation = isolation
        self.limits = Limits(None if timeout_s is None else float(timeout_s), memory_mb)
        self._store_lock = threading.Lock()
        self.store = None
        if store is not None:
            from nodice.evaluation.store import ResultStore

            # Opened first: a store that cannot be used is refused before any worker starts.
            self.store = ResultStore(store)
        self.executor = make_executor(executor or ExecutorConfig(), isolation, device, self.limits)
        self.workers = self.executor.workers

    def evaluate(
        self,
        path: str | Path,
        task: str,
        *,
        bench: bool = True,
        entry: str = "kernel",
        seed: int | None = None,
        run_id: str | None = None,
        static: bool = True,
        correctness: bool = True,
        dynamic: bool = True,
        contracts: list[str] | None = None,
        guards: bool = True,
        bench_options: BenchOptions | dict[str, Any] | None = None,
    ) -> Evaluation:
        """Judge (and, when it passes and ``bench``, score) one candidate file for ``task``.

        A convenience over :meth:`run`: the arguments are the fields of an
        :class:`~nodice.evaluation.request.EvaluationRequest` (``bench_options`` those of
        :class:`~nodice.evaluation.request.BenchOptions`, as the dataclass or a dict).
        """
        request = EvaluationRequest.create(
            path,
            task,
            seed=seed,
            contracts=contracts,
            bench_options=bench_options,
            entry=entry,
            bench=bench,
            static=static,
            correctness=correctness,
            dynamic=dynamic,
            guards=guards,
        )
        return self.run(request, run_id=run_id, candidate=str(path))

    def run(
        self, request: EvaluationRequest, *, run_id: str | None = None, candidate: str = ""
    ) -> Evaluation:
        """Run one request on a free worker; ``candidate``: the path as the caller wrote it (recorded)."""
        t0 = time.perf_counter()
        candidate = candidate or request.path
        p = Path(request.path)
        source, sha = _read(p)
        if not p.is_file():
            # Nothing to run: spare the worker (and the start-up of an isolated one).
            why = "a folder, not a file" if p.is_dir() else "no such file"
            outcome = JobOutcome(None, f"cannot load candidate: {why}: {p}")
        else:
            outcome = self.executor.run(request)
        check, scores, timings = self._unpack(outcome, candidate, request.task)
        bench_meta = dict((outcome.payload or {}).get("bench") or {})
        timings.update(outcome.timings)
        evaluation = Evaluation(
            check=check,
            scores=scores,
            ms=round((time.perf_counter() - t0) * 1e3, 3),
            task=request.task,
            candidate=candidate,
            sha256=sha,
            source=source,
            seed=request.seed,
            run_id=run_id,
            device=check.device or outcome.device or (self.device or ""),
            isolation=self.isolation,
            timings=timings,
            environment=dict(outcome.environment),
            timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
            log=outcome.log,
            bench=bench_meta,
        )
        if self.store is not None:
            with self._store_lock:
                self.store.save(evaluation)
        return evaluation

    def evaluate_many(self, paths: list[str | Path], task: str, **options: Any) -> list[Evaluation]:
        """:meth:`evaluate` on each path, up to ``workers`` at a time; results in the order of ``paths``."""
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            return list(pool.map(lambda p: self.evaluate(p, task, **options), paths))

    def _unpack(
        self, outcome: JobOutcome, candidate: str, task: str
    ) -> tuple[CheckResult, list[WorkloadScore], dict[str, float]]:
        if outcome.payload is not None:
            p = outcome.payload
            check = CheckResult.from_dict(p["check"])
            check.candidate = candidate
            return (
                check,
                [WorkloadScore.from_dict(s) for s in p.get("scores", [])],
                dict(p.get("timings", {})),
            )
        reason = f"kernel crashed: {outcome.failure}"
        not_the_kernel = (
            "timed out",
            "out of memory",
            "worker failed",
            "cannot load",
            "device unavailable",
            "not the candidate's fault",
        )
        if outcome.failure.startswith(not_the_kernel):
            reason = outcome.failure
        site = hang_site(outcome.log, Path(candidate)) if reason.startswith("timed out") else ""
        last = [ln for ln in outcome.log.strip().splitlines() if ln.strip()][-1:]
        inner = innermost_frame(outcome.log) if reason.startswith("timed out") and not site else ""
        state = "running" if "not hung" in reason else "stuck"
        if site:
            reason += f"; {state} at {site}"
        elif inner:
            reason += f"; {state} at {inner}, outside the candidate's files"
        elif last and "Fatal Python error" not in last[0]:
            reason += f" (last output: {last[0].strip()[:200]})"
        device = outcome.device or self.device or ""
        check = CheckResult("error", task, candidate, device, "", error=reason, reason=reason)
        return check, [], {}

    def close(self) -> None:
        self.executor.close()
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
