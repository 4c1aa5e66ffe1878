"""The built-in operator end to end on rmsnorm (CPU): the score improves, commits are real, BI tricks fail."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from nodice.cli.run import register
from nodice.evolution.engine import EvolveSummary
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from tests.evolution_helpers import BUILTIN_BUDGET, builtin_run

BuiltRun = tuple[Path, EvolveSummary, str]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltRun:
    return builtin_run(tmp_path_factory)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def test_score_improves_over_the_seed(built: BuiltRun) -> None:
    _, summary, printed = built
    assert summary.evaluations == BUILTIN_BUDGET
    assert summary.first_geomean > 0, printed
    assert summary.commits >= 2 and summary.best_geomean > summary.first_geomean, printed
    assert "evaluation budget spent" in summary.stop_reason


def test_every_version_is_a_git_commit_with_its_scores(built: BuiltRun) -> None:
    root, _, _ = built
    versions = Lineage(root).versions()
    assert [v.version for v in versions] == list(range(len(versions)))
    journal = Journal(root / "results.sqlite")
    committed = {a.id: a for a in journal.attempts() if a.outcome == "committed"}
    assert {v.attempt for v in versions} == set(committed)
    for v in versions:
        assert _git(root, "cat-file", "-t", v.sha).strip() == "commit"
        message = _git(root, "log", "-1", "--format=%B", v.sha)
        assert f"Nodice-Version: {v.version}" in message and "Nodice-Verdict: pass" in message
        assert "Nodice-Unit: GB/s" in message and message.splitlines()[0].startswith(f"v{v.version}: ")
        assert " GB/s geomean" in message.splitlines()[0]
        note = json.loads(_git(root, "notes", "--ref", "nodice", "show", v.sha))
        assert note["geomean"] == committed[v.attempt].geomean > 0 and note["unit"] == "GB/s"
        assert all(s["unit"] == "GB/s" and s["throughput"] == s["score"] > 0 for s in note["scores"])
        assert {s["workload"] for s in note["scores"]} == {"cpu-small", "cpu-wide"}
        # The committed tree holds exactly the source that was judged.
        assert _git(root, "show", f"{v.sha}:workspace/kernel.py") == committed[v.attempt].files["kernel.py"]
    geomeans = [v.geomean for v in versions]
    assert geomeans == sorted(geomeans)  # the commit rule: never below the best so far


def test_batch_dependent_rewrite_is_refused_and_not_retried(built: BuiltRun) -> None:
    root, _, _ = built
    attempts = Journal(root / "results.sqlite").attempts()
    eager = [a for a in attempts if a.label == "rewrite:small_batch_eager_path"]
    assert len(eager) == 1, [a.label for a in attempts]
    assert eager[0].outcome == "bi_violation" and eager[0].version is None
    assert "batch" in eager[0].feedback and "repair" in eager[0].feedback
    assert all(eager[0].files_sha != a.files_sha for a in attempts if a.outcome == "committed")
    # No source was evaluated twice.
    assert len({a.files_sha for a in attempts}) == len(attempts)


def test_state_file_and_progress_tell_the_story(built: BuiltRun) -> None:
    root, summary, printed = built
    state = json.loads((root / "state.json").read_text())
    assert state["status"] == "finished" and state["evaluations"] == BUILTIN_BUDGET
    assert state["best"]["geomean"] == summary.best_geomean and state["best"]["unit"] == "GB/s"
    assert summary.unit == "GB/s" and summary.best_text().startswith(f"{summary.best_geomean:.4g} GB/s")
    assert state["rejections"].get("bi_violation", 0) >= 1
    assert "small_batch_eager_path: bi_violation" in printed and "best " in printed
    assert f"best {summary.best_geomean:.4g} GB/s" in printed


def test_run_subcommands_for_external_agents(built: BuiltRun) -> None:
    root, summary, _ = built
    app = typer.Typer()
    register(app)
    cli = CliRunner()

    def nodice_run(*args: str) -> Result:
        return cli.invoke(app, ["run", *args, "--run-dir", str(root)])

    status = nodice_run("status", "--json")
    assert status.exit_code == 0, status.output
    data = json.loads(status.stdout)
    assert data["evaluations"] == BUILTIN_BUDGET and data["evaluations_left"] == 0
    assert data["best"]["geomean"] == summary.best_geomean and data["best"]["unit"] == "GB/s"
    lineage = nodice_run("lineage")
    assert lineage.exit_code == 0 and lineage.stdout.startswith("v0 ") and " GB/s" in lineage.stdout
    diff = nodice_run("show", "1", "--diff")
    assert diff.exit_code == 0 and diff.stdout.startswith("diff --git")
    missing = nodice_run("show", "99")
    assert missing.exit_code == 2 and "no version v99" in missing.stderr
    search = nodice_run("search", "split", "KV", "decode")
    assert search.exit_code == 0 and "Split-KV" in search.stdout
    # The budget is spent: evaluating is refused in one line, before any work.
    spent = nodice_run("eval")
    assert spent.exit_code == 2 and spent.stderr.strip().startswith("budget exhausted")
    # The workspace holds the best version again: committing it is refused, with the reason.
    again = nodice_run("commit", "-m", "again")
    assert again.exit_code == 1 and "already version" in again.stdout
