"""Two runs side by side: what batch invariance costs a search, and what it prevents.

The three figures of a BI-aware search against the vanilla baseline
(``nodice evolve --no-bi``) on the same task and device:

- **BI pass rate** of the final kernels: each run's best version (with
  ``all_versions``, every committed version) judged afterwards by the whole
  gate — static analysis, correctness, dynamic validation — on the runs'
  device, whatever rule the run itself committed under;
- **speedup retention**: the geomean throughput of run A's best over run B's
  best, on the workloads both were scored on (A the BI-aware run and B the
  vanilla one: the share of the vanilla speed the BI-aware search keeps);
- **intervention rate**: the share of a run's evaluations the gate rejected
  for batch invariance, read from its journal (0 for a vanilla run, which
  never runs the BI stages).

Scores come from the lineage (what each run measured when it committed), so
the figures are recomputable from the run directories alone; only the BI
verdicts are new measurements.
"""

from __future__ import annotations

import math
import sqlite3
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodice.errors import NodiceError, StoreError
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage, VersionRecord
from nodice.evolution.rundir import KERNEL_FILE, RunConfig, RunDir
from nodice.evolution.session import files_digest

if TYPE_CHECKING:
    from nodice.evaluation import Evaluator


class CompareError(NodiceError):
    kind = "cannot compare"


@dataclass
class JudgedVersion:
    """One committed version and the whole gate's verdict on it, given afterwards."""

    version: int
    sha: str
    geomean: float
    description: str
    verdict: str
    reason: str

    @property
    def passes(self) -> bool:
        return self.verdict == "pass"


@dataclass
class RunFigures:
    """One run: its search (from the journal and the lineage) and its judged versions."""

    run_dir: str
    task: str
    device: str
    mode: str  # "bi" | "vanilla"
    agent: str
    unit: str
    evaluations: int
    commits: int
    outcomes: dict[str, int]
    bi_rejections: int
    best_version: int | None
    best_geomean: float
    seed_geomean: float
    judged: list[JudgedVersion] = field(default_factory=list)

    @property
    def intervention_rate(self) -> float | None:
        return self.bi_rejections / self.evaluations if self.evaluations else None

    @property
    def best_verdict(self) -> str | None:
        best = [j for j in self.judged if j.version == self.best_version]
        return best[0].verdict if best else None

    @property
    def bi_pass_rate(self) -> float | None:
        """Share of the judged versions (the best alone, or every committed one) that pass the gate."""
        return sum(j.passes for j in self.judged) / len(self.judged) if self.judged else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["judged"] = [asdict(j) | {"passes": j.passes} for j in self.judged]
        d.update(
            intervention_rate=self.intervention_rate,
            best_verdict=self.best_verdict,
            bi_pass_rate=self.bi_pass_rate,
        )
        return d


@dataclass
class Comparison:
    a: RunFigures
    b: RunFigures
    workloads: list[str]
    speedup_retention: float | None
    all_versions: bool
    gate_seed: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.a.task,
            "device": self.a.device,
            "unit": self.a.unit,
            "judged": "all_versions" if self.all_versions else "best",
            "gate_seed": self.gate_seed,
            "bi_pass_rate": {"a": self.a.bi_pass_rate, "b": self.b.bi_pass_rate},
            "speedup_retention": self.speedup_retention,
            "workloads": self.workloads,
            "intervention_rate": {"a": self.a.intervention_rate, "b": self.b.intervention_rate},
            "runs": {"a": self.a.to_dict(), "b": self.b.to_dict()},
            "notes": self.notes,
        }


# ---- reading a run -------------------------------------------------------------------
def open_run(path: Path) -> tuple[RunDir, RunConfig, list[VersionRecord]]:
    run = RunDir(path)
    if not run.exists():
        raise CompareError(f"{path} is not a nodice run (no run.json)")
    config = run.load_config()
    versions = Lineage(run.root).versions() if (run.root / ".git").is_dir() else []
    return run, config, versions


def run_figures(
    run: RunDir, config: RunConfig, versions: list[VersionRecord], shown: str | None = None
) -> RunFigures:
    """What the run's journal and lineage say, before anything is judged again."""
    attempts = []
    if run.store_path.is_file():
        try:
            journal = Journal(run.store_path)
            try:
                attempts = journal.attempts()
            finally:
                journal.close()
        except (sqlite3.Error, StoreError) as exc:
            raise CompareError(f"cannot read the journal of {shown or run.root}: {exc}") from None
    outcomes: dict[str, int] = {}
    for a in attempts:
        outcomes[a.outcome] = outcomes.get(a.outcome, 0) + 1
    best = versions[-1] if versions else None
    return RunFigures(
        run_dir=shown or str(run.root),
        task=config.task,
        device=config.device,
        mode="bi" if config.bi else "vanilla",
        agent=config.agent,
        unit=config.unit or (best.unit if best else ""),
        evaluations=len(attempts),
        commits=len(versions),
        outcomes=outcomes,
        bi_rejections=sum(a.verdict == "bi_violation" for a in attempts),
        best_version=best.version if best else None,
        best_geomean=best.geomean if best else 0.0,
        seed_geomean=versions[0].geomean if versions else 0.0,
    )


def version_files(run: RunDir, sha: str) -> dict[str, str]:
    """The workspace sources of one committed version, from git."""
    lineage = Lineage(run.root)
    listing = lineage.git("ls-tree", "-r", "--name-only", sha, "--", "workspace").split()
    return {p.removeprefix("workspace/"): lineage.show(sha, p) for p in listing}


# ---- the figures ---------------------------------------------------------------------------
def _scores(version: VersionRecord) -> dict[str, float]:
    return {str(s["workload"]): float(s.get("score", 0.0)) for s in version.scores}


def _geomean(values: list[float]) -> float:
    if not values or min(values) <= 0:
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def speedup_retention(a: VersionRecord, b: VersionRecord) -> tuple[float | None, list[str]]:
    """Geomean of ``a``'s scores over that of ``b``'s, on the workloads both were scored on."""
    sa, sb = _scores(a), _scores(b)
    common = [w for w in sa if w in sb]
    ga, gb = _geomean([sa[w] for w in common]), _geomean([sb[w] for w in common])
    return (ga / gb if gb > 0 else None), common


def judge_versions(
    run: RunDir,
    versions: list[VersionRecord],
    task: str,
    evaluator: Evaluator,
    seed: int,
    cache: dict[str, tuple[str, str]],
) -> list[JudgedVersion]:
    """The whole gate on each version, in the sandbox; sources judged once across both runs."""
    judged = []
    for v in versions:
        files = version_files(run, v.sha)
        key = files_digest(files)
        if key not in cache:
            if KERNEL_FILE not in files:
                cache[key] = ("error", f"version v{v.version} has no {KERNEL_FILE}")
            else:
                with tempfile.TemporaryDirectory(prefix="nodice-compare-") as folder:
                    for rel, text in files.items():
                        target = Path(folder) / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(text, encoding="utf-8")
                    ev = evaluator.evaluate(str(Path(folder) / KERNEL_FILE), task, bench=False, seed=seed)
                cache[key] = (ev.verdict, ev.check.reason or ev.check.error or "")
        verdict, reason = cache[key]
        judged.append(JudgedVersion(v.version, v.sha, v.geomean, v.description, verdict, reason))
    return judged


def compare_runs(
    path_a: Path,
    path_b: Path,
    *,
    all_versions: bool = False,
    gate_seed: int = 0,
    evaluator: Evaluator | None = None,
) -> Comparison:
    """The three figures of run A against run B (A BI-aware, B vanilla for the usual reading)."""
    if Path(path_a).resolve() == Path(path_b).resolve():
        raise CompareError(f"{path_a} is given as both runs: compare two different runs")
    run_a, config_a, versions_a = open_run(path_a)
    run_b, config_b, versions_b = open_run(path_b)
    if config_a.task != config_b.task:
        raise CompareError(f"{path_a} evolves '{config_a.task}', {path_b} evolves '{config_b.task}'")
    if config_a.device != config_b.device:
        raise CompareError(
            f"{path_a} ran on {config_a.device}, {path_b} on {config_b.device}: scores would not compare"
        )
    fig_a = run_figures(run_a, config_a, versions_a, str(path_a))
    fig_b = run_figures(run_b, config_b, versions_b, str(path_b))
    if fig_a.unit and fig_b.unit and fig_a.unit != fig_b.unit:
        raise CompareError(f"{path_a} scores in {fig_a.unit}, {path_b} in {fig_b.unit}")
    notes = []
    if fig_a.mode == "vanilla" and fig_b.mode == "bi":
        notes.append("RUN_A is the vanilla run and RUN_B the BI-aware one: retention reads inverted")
    elif fig_a.mode == fig_b.mode:
        notes.append(f"both runs are {fig_a.mode} runs: retention is simply A's best over B's")
    retention: float | None = None
    common: list[str] = []
    if versions_a and versions_b:
        retention, common = speedup_retention(versions_a[-1], versions_b[-1])
    for fig, versions in ((fig_a, versions_a), (fig_b, versions_b)):
        if not versions:
            notes.append(f"{fig.run_dir} has no committed version")
    owns = evaluator is None
    if evaluator is None:
        from nodice.evaluation import Evaluator
        from nodice.evolution.start import pick_device

        try:
            pick_device(config_a.device)  # judged where the runs ran, or not at all
        except NodiceError as exc:
            raise CompareError(f"the runs ran on {config_a.device}: {exc.line()}") from None
        try:
            evaluator = Evaluator(device=config_a.device, isolation="persistent")
        except ValueError as exc:
            raise CompareError(f"device unavailable: {exc}") from None
    cache: dict[str, tuple[str, str]] = {}
    try:
        for fig, run, versions in ((fig_a, run_a, versions_a), (fig_b, run_b, versions_b)):
            chosen = versions if all_versions else versions[-1:]
            fig.judged = judge_versions(run, chosen, config_a.task, evaluator, gate_seed, cache)
    finally:
        if owns:
            evaluator.close()
    errors = sum(j.verdict == "error" for f in (fig_a, fig_b) for j in f.judged)
    if errors:
        notes.append(f"{errors} version(s) could not be judged (error); the pass rates count them as failing")
    return Comparison(fig_a, fig_b, common, retention, all_versions, gate_seed, notes)
