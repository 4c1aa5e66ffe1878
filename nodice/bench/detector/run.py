"""The detector benchmark: how well each BI module, and the whole gate, separates the labeled pool.

Every candidate with an oracle label on the device runs through three
configurations of the real gate (``nodice.gate.pipeline.check``): static
analysis alone, dynamic validation alone, and the full gate (static →
correctness → dynamic). A violating candidate counts as detected when the
verdict is ``bi_violation``; an invariant one is falsely rejected when the
verdict is anything but ``pass``.

Time per candidate is the sum of the gate's stage times without the ``load``
stage (importing the candidate's module), from runs that follow a warm-up run
of the full gate in the same worker process, so that Triton's compilation and
first-call costs are excluded. The static-only time is the median of a few
repeats, since it is short.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodice.bench.detector.pool import Pool, PoolEntry
from nodice.bench.detector.workers import JobOutcome, gpu_count, run_jobs
from nodice.measuring.provenance import environment


@dataclass(frozen=True)
class GateMode:
    """Which stages of ``nodice.gate.pipeline.check`` run."""

    static: bool
    correctness: bool
    dynamic: bool


# The ablation: each BI module alone, then the whole gate.
MODES: dict[str, GateMode] = {
    "static": GateMode(static=True, correctness=False, dynamic=False),
    "dynamic": GateMode(static=False, correctness=False, dynamic=True),
    "full": GateMode(static=True, correctness=True, dynamic=True),
}
MODE_TITLES = {"static": "static only", "dynamic": "dynamic only", "full": "full gate"}
STATIC_REPEATS = 5


@dataclass
class ModeRun:
    verdict: str
    ms: float
    reason: str = ""
    stages: dict[str, str] = field(default_factory=dict)  # stage name → its verdict
    stage_ms: dict[str, float] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)  # the dynamic stage's contexts and kernel calls


@dataclass
class CandidateRun:
    key: str
    task: str
    mechanism: str
    pattern: str
    label: str
    modes: dict[str, ModeRun]


@dataclass
class ModeScore:
    violating: int
    detected: int
    invariant: int
    false_rejections: int
    errors: int
    detection_rate: float | None
    false_rejection_rate: float | None
    median_ms: float | None
    median_ms_invariant: float | None  # a pass runs every stage to the end
    p90_ms: float | None
    missed: list[str]
    falsely_rejected: list[str]


@dataclass
class DetectorReport:
    device: str
    date: str
    machine: str
    versions: dict[str, str]
    command: str
    seed: int
    timing: str
    candidates_labeled: int
    excluded: dict[str, str]  # key → why the oracle could not label it on this device
    scores: dict[str, ModeScore]
    by_task: dict[str, dict[str, dict[str, int]]]  # task → mode → counts
    by_mechanism: dict[str, dict[str, dict[str, int]]]
    runs: list[CandidateRun]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gate_ms(stages: list[Any]) -> float:
    """Stage times of one gate run without the candidate's import."""
    return round(sum(s.ms for s in stages if s.name != "load"), 3)


def judge_job(path: str, task: str, device: str, seed: int, warmup: bool) -> dict[str, Any]:
    """Worker entry point: one candidate through every mode of the gate, after a warm-up run."""
    from nodice.gate.pipeline import check

    def run(m: GateMode) -> Any:
        return check(
            path,
            task,
            device=device,
            seed=seed,
            static=m.static,
            correctness=m.correctness,
            dynamic=m.dynamic,
        )

    if warmup:
        run(MODES["full"])
    out: dict[str, Any] = {}
    for mode, gate in MODES.items():
        repeats = STATIC_REPEATS if mode == "static" else 1
        results = [run(gate) for _ in range(repeats)]
        r = results[-1]
        out[mode] = asdict(
            ModeRun(
                verdict=r.verdict,
                ms=round(statistics.median(gate_ms(x.stages) for x in results), 3),
                reason=r.reason[:300],
                stages={s.name: s.verdict for s in r.stages},
                stage_ms={s.name: s.ms for s in r.stages},
                stats=next((s.stats for s in r.stages if s.name == "dynamic"), {}),
            )
        )
    return out


def _rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def score(runs: list[CandidateRun], mode: str) -> ModeScore:
    bad = [r for r in runs if r.label == "violating"]
    good = [r for r in runs if r.label == "invariant"]
    missed = [r.key for r in bad if r.modes[mode].verdict != "bi_violation"]
    rejected = [r.key for r in good if r.modes[mode].verdict != "pass"]
    times = [r.modes[mode].ms for r in runs if r.modes[mode].verdict != "error"]
    good_times = [r.modes[mode].ms for r in good if r.modes[mode].verdict == "pass"]
    p90 = round(statistics.quantiles(times, n=10)[-1], 3) if len(times) >= 2 else _median(times)
    return ModeScore(
        violating=len(bad),
        detected=len(bad) - len(missed),
        invariant=len(good),
        false_rejections=len(rejected),
        errors=sum(r.modes[mode].verdict == "error" for r in runs),
        detection_rate=_rate(len(bad) - len(missed), len(bad)),
        false_rejection_rate=_rate(len(rejected), len(good)),
        median_ms=_median(times),
        median_ms_invariant=_median(good_times),
        p90_ms=p90,
        missed=missed,
        falsely_rejected=rejected,
    )


def _breakdown(runs: list[CandidateRun], attr: str) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in runs:
        group = out.setdefault(
            getattr(r, attr),
            {m: {"violating": 0, "detected": 0, "invariant": 0, "false_rejections": 0} for m in MODES},
        )
        for mode in MODES:
            g, v = group[mode], r.modes[mode].verdict
            if r.label == "violating":
                g["violating"] += 1
                g["detected"] += v == "bi_violation"
            else:
                g["invariant"] += 1
                g["false_rejections"] += v != "pass"
    return out


_SCORED = ("violating", "invariant")


def _why_unscored(e: PoolEntry, device: str) -> str:
    if device not in e.labels:
        return f"no {device} label"
    if e.stale(device):
        return "stale label: the file changed since the oracle ran it"
    return e.labels[device].reason


def spread(entries: list[PoolEntry], device: str, limit: int | None) -> list[PoolEntry]:
    """Labeled entries, round-robin over (task, label) so that a limited run still covers the pool."""
    groups: dict[tuple[str, str], list[PoolEntry]] = {}
    for e in entries:
        label = e.label(device)
        if label in _SCORED:
            groups.setdefault((e.spec.task, label), []).append(e)
    order: list[PoolEntry] = []
    queues = [list(g) for _, g in sorted(groups.items())]
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order[:limit] if limit is not None else order


def _timing(warmup: bool) -> str:
    return "median over candidates of the gate's stage times without the load stage, " + (
        "after a warm-up run of the full gate in the same process" if warmup else "without a warm-up run"
    )


def assemble(
    pool: Pool,
    device: str,
    runs: list[CandidateRun],
    meta: dict[str, Any],
    considered: list[PoolEntry] | None = None,
) -> DetectorReport:
    """Score ``runs`` against the pool's current labels for ``device`` (unlabeled runs are dropped).

    ``meta`` carries the run's provenance: date, machine, versions, command, seed, timing.
    ``considered``: the entries the run was asked to judge (default: every entry of the runs' tasks),
    of which those without a usable label are listed as excluded.
    """
    entries = {e.spec.key: e for e in pool.entries}
    scored = []
    for r in runs:
        e = entries.get(r.key)
        label = e.label(device) if e else None
        if label in _SCORED:
            r.label = str(label)
            scored.append(r)
    tasks = {r.task for r in runs}
    if considered is None:
        considered = [e for e in pool.entries if e.spec.task in tasks]
    excluded = {e.spec.key: _why_unscored(e, device) for e in considered if e.label(device) not in _SCORED}
    return DetectorReport(
        device=device,
        candidates_labeled=len(scored),
        excluded=excluded,
        scores={m: score(scored, m) for m in MODES},
        by_task=_breakdown(scored, "task"),
        by_mechanism=_breakdown(scored, "mechanism"),
        runs=scored,
        **meta,
    )


def run_detector(
    pool: Pool,
    device: str,
    *,
    limit: int | None = None,
    tasks: list[str] | None = None,
    jobs: int = 1,
    seed: int = 0,
    warmup: bool = True,
    timeout_s: float = 1800.0,
    on_done: Callable[[CandidateRun], None] | None = None,
    done_before: list[CandidateRun] | None = None,
    split: str | None = None,
    ray_address: str | None = None,
    on_ray: bool = False,
) -> DetectorReport:
    """Run the labeled candidates (all, or ``limit`` of them spread over the pool) through every mode.

    ``done_before``: results of an interrupted run of the same configuration; those candidates are
    not run again. ``on_ray``: ``jobs`` candidates at a time on the Ray cluster at ``ray_address``
    (one GPU, or one CPU, each), instead of ``jobs`` local worker processes.
    """
    entries = [
        e
        for e in pool.entries
        if (not tasks or e.spec.task in tasks) and (not split or e.spec.split == split)
    ]
    previous = list(done_before or [])
    skip = {r.key for r in previous}
    chosen = [e for e in spread(entries, device, limit) if e.spec.key not in skip]
    by_key = {e.spec.key: e for e in chosen}
    job_list = [
        (
            e.spec.key,
            {
                "path": str(pool.path_of(e)),
                "task": e.spec.task,
                "device": device,
                "seed": seed,
                "warmup": warmup,
            },
        )
        for e in chosen
    ]

    def to_run(o: JobOutcome) -> CandidateRun:
        e = by_key[o.key]
        if o.result is None:
            modes = {m: ModeRun("error", 0.0, f"benchmark worker: {o.error}") for m in MODES}
        else:
            modes = {m: ModeRun(**o.result[m]) for m in MODES}
        return CandidateRun(
            e.spec.key, e.spec.task, e.spec.mechanism, e.spec.pattern, str(e.label(device)), modes
        )

    def done(o: JobOutcome) -> None:
        if on_done is not None:
            on_done(to_run(o))

    meta = run_meta(device, seed, warmup)
    target = "nodice.bench.detector.run:judge_job"
    if on_ray:
        from nodice.bench.ray_jobs import run_jobs_ray

        outcomes = run_jobs_ray(target, job_list, jobs, timeout_s, done, device, ray_address)
    else:
        outcomes = run_jobs(target, job_list, jobs, timeout_s, done, gpu_count(device))
    return assemble(pool, device, previous + [to_run(o) for o in outcomes], meta, entries)


def run_meta(device: str, seed: int, warmup: bool) -> dict[str, Any]:
    """Provenance of a benchmark run: date, machine, versions, command, seed, how time is measured."""
    machine, versions = environment(device)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "versions": versions,
        "command": "nodice " + " ".join(sys.argv[1:]) if sys.argv and "nodice" in sys.argv[0] else "",
        "seed": seed,
        "timing": _timing(warmup),
    }


def run_from_dict(d: dict[str, Any]) -> CandidateRun:
    modes = {m: ModeRun(**v) for m, v in d["modes"].items()}
    return CandidateRun(d["key"], d["task"], d["mechanism"], d["pattern"], d["label"], modes)


def load_runs(path: Path) -> tuple[dict[str, Any], list[CandidateRun]]:
    """(provenance, runs) of a report JSON, or of a ``--progress`` JSON-lines file (provenance first)."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        head = lines[0] if lines and "key" not in lines[0] else {}
        return head, [run_from_dict(d) for d in lines if "key" in d]
    head = json.loads(text)
    return head, [run_from_dict(d) for d in head.get("runs", [])]


def rescore(pool: Pool, device: str, report_path: Path, split: str | None = None) -> DetectorReport:
    """An earlier report's verdicts scored against the pool's current labels (no gate run).

    ``report_path`` is a report JSON, or the JSON-lines progress file of a run (one candidate per line).
    """
    head, runs = load_runs(report_path)
    meta: dict[str, Any] = {
        k: head.get(k, "") for k in ("date", "machine", "versions", "command", "seed", "timing")
    }
    meta["seed"] = int(meta["seed"] or 0)
    for key in ("versions", "timing"):  # objects in the report; a progress file may lack them
        meta[key] = meta[key] if isinstance(meta[key], dict) else {}
    meta["command"] = f"{meta['command']} (rescored against the labels of {_labels_date(pool, device)})"
    if split is None:
        return assemble(pool, device, runs, meta)
    chosen = {e.spec.key: e for e in pool.entries if e.spec.split == split}
    runs = [r for r in runs if r.key in chosen]
    tasks = {r.task for r in runs}
    return assemble(pool, device, runs, meta, [e for e in chosen.values() if e.spec.task in tasks])


def _labels_date(pool: Pool, device: str) -> str:
    return str(pool.oracle.get(device, {}).get("date", "unknown date"))
