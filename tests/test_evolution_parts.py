"""The evolution engine's parts that need no evaluation: lineage, journal, operator, supervisor, knowledge."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console

from nodice.evolution.agents.builtin import BuiltinAgent, Memory, Proposal, tags_of
from nodice.evolution.agents.mutations import param_mutations
from nodice.evolution.agents.rewrites import CATALOG as REWRITES
from nodice.evolution.directions import CATALOG as DIRECTIONS
from nodice.evolution.directions import Direction
from nodice.evolution.feedback import describe_scores
from nodice.evolution.journal import Attempt, Intervention, Journal
from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.lineage import Lineage, VersionRecord
from nodice.evolution.progress import Progress, ProgressState
from nodice.evolution.rundir import RunConfig, RunDir, RunDirError
from nodice.evolution.scores import ratio_best_of, unit_of
from nodice.evolution.supervisor import Supervisor, SupervisorConfig, find_trigger
from nodice.measuring.score import LEGACY_UNIT
from tests.conftest import EXAMPLES
from tests.evolution_helpers import throughput_scores

SEED = (EXAMPLES / "rmsnorm" / "seed.py").read_text()


def _attempt(i: int, outcome: str, label: str = "edit", geomean: float = 0.0, sha: str = "") -> Attempt:
    return Attempt(
        id=i,
        created=time.time(),
        agent="builtin",
        label=label,
        description="",
        files_sha=sha or f"s{i}",
        files={"kernel.py": f"# {i}"},
        bench=True,
        verdict="pass" if outcome in ("committed", "committing", "eligible", "slower") else outcome,
        reason="",
        geomean=geomean,
        scores=[],
        stages={},
        feedback="",
        outcome=outcome,
        best_before=0.0,
    )


def test_lineage_commits_carry_throughput_in_trailers_and_notes(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.create(RunConfig(task="rmsnorm", device="cpu", unit="GB/s"), SEED)
    lineage = Lineage(run.root)
    lineage.init()
    lineage.commit_workspace("run: seed\n")
    scores = throughput_scores({"cpu-small": 2900.0, "cpu-wide": 3100.0}, {"torch F.rms_norm": 3200.0})
    rec = VersionRecord(
        version=3,
        attempt=1,
        geomean=2998.3,
        verdict="pass",
        stages={"static": "pass", "dynamic": "pass"},
        scores=scores,
        description="the seed",
        agent="seed",
        created=time.time(),
        unit="GB/s",
        ratio_best=ratio_best_of(scores),
    )
    sha = lineage.commit_version(rec, 2880.0)
    message = subprocess.run(
        ["git", "log", "-1", "--format=%B", sha], cwd=run.root, capture_output=True, text=True, check=True
    ).stdout
    subject = message.splitlines()[0]
    assert subject == "v3: 2998 GB/s geomean (0.94× best baseline) (+4.1% over the best before)"
    assert "Nodice-Unit: GB/s" in message and "Nodice-Ratio-Best: 0.93" in message
    assert "Nodice-Scores: cpu-small=2900 cpu-wide=3100" in message
    [back] = lineage.versions()
    assert back.sha == sha and back.unit == "GB/s" and back.scores == scores and back.noted
    assert back.scores[0]["baselines"]["torch F.rms_norm"]["bi"] == "pass"
    # Without the notes the trailers alone still give the unit, the throughput and the ratio back.
    subprocess.run(["git", "update-ref", "-d", "refs/notes/nodice"], cwd=run.root, check=True)
    [bare] = lineage.versions()
    assert not bare.noted and (bare.version, bare.geomean, bare.unit) == (3, 2998.3, "GB/s")
    assert bare.ratio_best == pytest.approx(rec.ratio_best, rel=1e-5) and not bare.is_legacy
    assert bare.scores[1] == {"workload": "cpu-wide", "score": 3100.0, "unit": "GB/s", "throughput": 3100.0}
    assert unit_of(bare.scores) == "GB/s"


def test_old_trailers_and_notes_read_as_speedups(tmp_path: Path) -> None:
    """Commits from before throughput scores: no Nodice-Unit, notes whose scores have no unit."""
    run = RunDir(tmp_path / "run")
    run.create(RunConfig(task="rmsnorm", device="cpu"), SEED)
    lineage = Lineage(run.root)
    lineage.init()
    old = "v0: geomean 1.35\n\nthe seed\n\nNodice-Version: 0\nNodice-Geomean: 1.35\nNodice-Scores: a=1.35\n"
    sha = lineage.commit_workspace(old)
    [bare] = lineage.versions()
    assert bare.is_legacy and bare.geomean == 1.35 and bare.ratio_best is None
    assert unit_of(bare.scores) == LEGACY_UNIT
    lineage.add_note(
        sha,
        {
            "version": 0,
            "attempt": 1,
            "geomean": 1.35,
            "verdict": "pass",
            "stages": {},
            "scores": [{"workload": "a", "score": 1.35, "ms": 2.0}],
            "description": "seed",
            "agent": "seed",
            "created": 0.0,
        },
    )
    [noted] = lineage.versions()
    assert noted.noted and noted.is_legacy and noted.scores[0]["ms"] == 2.0


def test_feedback_and_live_view_speak_throughput() -> None:
    """What the agent reads and what the live view prints: throughput, each baseline, ratios, the limit."""
    seed_scores = throughput_scores({"cpu-small": 2500.0, "cpu-wide": 2700.0}, {"torch F.rms_norm": 3000.0})
    better = throughput_scores(
        {"cpu-small": 2800.0, "cpu-wide": 2900.0}, {"torch F.rms_norm": 3000.0, "eager": 1000.0}
    )
    geomean = (2800.0 * 2900.0) ** 0.5
    lines = describe_scores(better, geomean)
    assert lines[0].startswith(
        "score: geomean throughput 2850 GB/s (0.95× best baseline, 71% of copy bandwidth)"
    )
    assert lines[1] == "  cpu-small: 2800 GB/s in 1 ms, 70% of copy bandwidth"
    assert "torch F.rms_norm 3000 GB/s (yours is 0.93×, BI pass)" in lines[2]
    assert "eager 1000 GB/s (yours is 2.80×, BI pass)" in lines[2]
    assert lines[2].endswith("fastest: torch F.rms_norm, yours is 0.93×")

    console = Console(record=True, width=300, force_terminal=False)
    progress = Progress(ProgressState("rmsnorm", "builtin", "cpu", budget=4, unit="GB/s"), console)
    first = _attempt(1, "committed", "seed", geomean=(2500.0 * 2700.0) ** 0.5)
    first.scores, first.version = seed_scores, 0
    second = _attempt(2, "committed", "edit", geomean=geomean)
    second.scores, second.version = better, 1
    with progress:
        progress.attempt(first, 1)
        progress.attempt(second, 2)
    printed = console.export_text()
    assert "#2 edit: committed -> v1 geomean 2850 GB/s" in printed
    assert "best 2850 GB/s (0.95× best baseline, 71% of copy bandwidth) +9.7% over v0" in printed


def test_workspace_paths_cannot_escape(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.create(RunConfig(task="rmsnorm", device="cpu"), SEED)
    for bad in ("../run.json", "/etc/passwd", "../../x.py", ""):
        with pytest.raises(RunDirError):
            run.resolve_in_workspace(bad)
    assert run.resolve_in_workspace("kernel.py") == run.kernel


def test_journal_round_trip_and_rejections(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "store.sqlite")
    for i, outcome in enumerate(["committed", "bi_violation", "slower", "bi_violation"], start=1):
        journal.add_attempt(_attempt(i, outcome))
    journal.add_intervention(Intervention(0, time.time(), 4, "loop", "review", ["bi_repair"], "bi_repair"))
    journal.close()
    again = Journal(tmp_path / "store.sqlite")
    assert [a.outcome for a in again.attempts()] == ["committed", "bi_violation", "slower", "bi_violation"]
    assert again.rejections_by_reason() == {"bi_violation": 2, "slower": 1}
    assert again.interventions()[0].directions == ["bi_repair"]
    assert again.attempts(since=3)[0].id == 4


def test_param_mutations_touch_host_code_only() -> None:
    keys = {m.key for m in param_mutations(SEED)}
    assert keys == {
        "param:cap(block_h)=2048",
        "param:cap(block_h)=512",
        "param:num_warps=8",
        "param:num_warps=2",
    }
    wider = next(m for m in param_mutations(SEED) if m.key == "param:cap(block_h)=2048")
    assert "min(triton.next_power_of_2(hidden), 2048)" in wider.source
    assert wider.source.replace("2048", "1024") == SEED
    assert "tl.arange(0, BLOCK_H)" in wider.source  # device code untouched


def test_rewrites_apply_to_the_seed_and_mark_batch_dependence() -> None:
    applied = {r.name: r.apply(SEED, "rmsnorm") for r in REWRITES}
    assert all(src is not None and src != SEED for src in applied.values())
    assert "if batch <= 4:" in (applied["small_batch_eager_path"] or "")
    assert "256 if batch < 64 else" in (applied["batch_adaptive_tile"] or "")
    assert "ROWS_PER_PROGRAM = 4" in (applied["multi_row_tile"] or "")
    assert {r.name for r in REWRITES if r.batch_dependent} == {
        "small_batch_eager_path",
        "batch_adaptive_tile",
    }
    for src in applied.values():
        compile(src or "", "candidate.py", "exec")
    assert all(r.apply(SEED, "gemm") is None for r in REWRITES if r.name != "batch_adaptive_tile")


def test_operator_never_reproposes_what_the_gate_rejected() -> None:
    agent = BuiltinAgent(rng_seed=0)
    files = {"kernel.py": SEED}
    first = agent.choose(agent.proposals(SEED, "rmsnorm"), files, 0)
    assert first is not None and first.key == "rewrite:small_batch_eager_path"
    agent.memory.record(first.key, _attempt(1, "bi_violation", first.key))
    second = agent.choose(agent.proposals(SEED, "rmsnorm"), files, 1)
    assert second is not None and second.key != first.key
    # One BI rejection of a batch-dependent rewrite makes the other one far less attractive.
    adaptive = next(p for p in agent.proposals(SEED, "rmsnorm") if p.key == "rewrite:batch_adaptive_tile")
    assert agent.memory.weight(adaptive) == pytest.approx(0.25)
    # The bi_repair direction rules batch-dependent rewrites out entirely.
    agent.redirect(DIRECTIONS["bi_repair"], "")
    picks = set()
    for i in range(30):
        p = agent.choose(agent.proposals(SEED, "rmsnorm"), files, i)
        assert p is not None
        picks.add(p.key)
    assert "rewrite:batch_adaptive_tile" not in picks


def test_memory_bans_failures_and_collects_near_misses() -> None:
    memory = Memory()
    memory.record("param:num_warps=8", _attempt(1, "slower", "param:num_warps=8"))
    memory.record("param:cap(block_h)=512", _attempt(2, "incorrect", "param:cap(block_h)=512"))
    p = Proposal("param:num_warps=8", "", "", 0.5, tags_of("param:num_warps=8"))
    assert memory.weight(p) == 0.5
    assert memory.banned == {"param:cap(block_h)=512": "incorrect"}
    assert memory.near_misses == ["param:num_warps=8"]
    assert tags_of("rewrite:small_batch_eager_path") == {"rewrite", "batch_dependent"}


def test_supervisor_triggers_on_loops_and_stagnation() -> None:
    cfg = SupervisorConfig(stagnation_window=4, loop_window=3)
    bi_loop = [_attempt(1, "committed", geomean=1.0)] + [_attempt(i, "bi_violation") for i in range(2, 5)]
    assert "loop" in (find_trigger(bi_loop, None, cfg) or "")
    iv = Supervisor(cfg).check(bi_loop, [])
    assert iv is not None and iv.chosen == "bi_repair" and iv.source == "rules"
    stagnant = [_attempt(1, "committed", geomean=1.0)] + [
        _attempt(i, "slower" if i % 2 else "incorrect") for i in range(2, 7)
    ]
    assert "stagnation" in (find_trigger(stagnant, None, cfg) or "")
    # Right after an intervention the supervisor waits for new evidence.
    last = Intervention(0, 0.0, after_attempt=6, trigger="", review="", chosen="combine")
    assert find_trigger(stagnant, last, cfg) is None
    repeated = [_attempt(i, "slower", sha="same") for i in range(1, 4)]
    assert "same source" in (find_trigger(repeated, None, cfg) or "")


def test_supervisor_asks_the_llm_and_falls_back_to_rules() -> None:
    attempts = [_attempt(1, "committed", geomean=1.0)] + [_attempt(i, "incorrect") for i in range(2, 5)]
    prompts: list[str] = []

    def advisor(prompt: str) -> str:
        prompts.append(prompt)
        return "DIRECTION: explore\nStart again from the best version."

    iv = Supervisor(SupervisorConfig(loop_window=3), advisor=advisor).check(attempts, [])
    assert iv is not None and iv.chosen == "explore" and iv.source == "llm"
    assert "Start again" in iv.review and "correctness_repair" in prompts[0]
    rules = Supervisor(SupervisorConfig(loop_window=3), advisor=lambda p: "no idea").check(attempts, [])
    assert rules is not None and rules.source == "rules" and rules.chosen == "correctness_repair"


def test_knowledge_base_ranks_sections_and_takes_user_folders(tmp_path: Path) -> None:
    kb = KnowledgeBase()
    assert len(kb.documents()) >= 4
    [top, *_] = kb.search("split-KV decode number of splits from the batch")
    assert "split" in top.section.heading.lower()
    (tmp_path / "notes.md").write_text(
        "# Our notes\n\n## Persistent rmsnorm\n\nUse a zebra-stripe schedule.\n"
    )
    mine = KnowledgeBase([tmp_path])
    [hit, *_] = mine.search("zebra stripe schedule")
    assert hit.section.document == "notes.md" and hit.section.heading == "Persistent rmsnorm"
    assert mine.render_search("qqqq unmatched").startswith("no section")


def test_every_direction_has_guidance() -> None:
    assert all(isinstance(d, Direction) and len(d.text) > 40 for d in DIRECTIONS.values())


def test_reconcile_finishes_what_a_kill_interrupted(tmp_path: Path) -> None:
    """The states a kill -9 can leave: an unfinished commit, a stale git lock, a commit without its note."""
    from nodice.evolution.session import RunSession
    from nodice.evolution.start import EvolveOptions, prepare_run

    run, config, _ = prepare_run(EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu"))
    session = RunSession(run, config)
    try:
        scores = throughput_scores({"cpu-small": 0.5}, {"torch F.rms_norm": 2.0})
        seed = _attempt(0, "committing", "seed", geomean=0.5)
        seed.files, seed.scores = {"kernel.py": SEED}, scores
        session.journal.add_attempt(seed)  # recorded, but killed before git had it
        (run.root / ".git" / "index.lock").write_text("")  # and git was killed holding its index
        notes = session.reconcile()
        assert any("stale git lock" in n for n in notes) and any("being committed" in n for n in notes)
        [v0] = session.versions()
        assert (
            v0.attempt == seed.id
            and v0.geomean == 0.5
            and v0.unit == "GB/s"
            and v0.ratio_best == 0.25
            and session.journal.attempts()[0].outcome == "committed"
        )

        # Git has the commit but the journal was not updated, and the note was never written.
        better = _attempt(0, "eligible", "edit", geomean=0.75)
        better.files, better.scores = {"kernel.py": SEED + "\n# faster\n"}, scores
        session.journal.add_attempt(better)
        session.run.write_workspace(better.files)
        rec = VersionRecord(1, better.id, 0.75, "pass", {}, [], "edit", "builtin", 0.0, unit="GB/s")
        session.lineage.commit_workspace(rec.message(0.5))  # trailers only: the kill came before the note
        notes = session.reconcile()
        assert any("journal updated" in n for n in notes) and any("note restored" in n for n in notes)
        v1 = session.versions()[1]
        assert v1.noted and v1.scores == scores and session.journal.attempts()[1].outcome == "committed"
        assert session.reconcile() == []  # nothing left to repair
    finally:
        session.close()


def test_param_sites_in_tuples_conditionals_and_repeated_launches() -> None:
    source = (
        "import triton\n\n"
        "def kernel(q, k):\n"
        "    if q.shape[-1] < 64:\n"
        "        block_m, block_n = 32, 16\n"
        "    else:\n"
        "        block_m, block_n = 128, 64\n"
        "    num_warps = 8 if q.shape[-1] >= 64 else 4\n"
        "    _a[(1,)](q, BLOCK=block_m, num_warps=num_warps, num_stages=3)\n"
        "    _b[(1,)](k, num_warps=4)\n"
    )
    keys = {m.key for m in param_mutations(source)}
    assert {"param:block_m=64", "param:block_n#2=128", "param:num_warps=16", "param:num_warps#2=2"} <= keys
    assert {"param:num_stages=2", "param:num_stages=4", "param:num_warps#3=8"} <= keys
    one = next(m for m in param_mutations(source) if m.key == "param:num_warps#2=2")
    assert "num_warps = 8 if q.shape[-1] >= 64 else 2" in one.source
    assert tags_of(one.key) >= {"param", "num_warps"}
