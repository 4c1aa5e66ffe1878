"""A hostile agent cannot break the run: broken kernels and BI violations are refused, paths stay inside."""

from __future__ import annotations

from pathlib import Path

from nodice.evolution.journal import Journal
from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.lineage import Lineage
from nodice.evolution.session import RunSession
from nodice.evolution.start import EvolveOptions, prepare_run
from nodice.evolution.tools import AgentTools
from tests.conftest import EXAMPLES, run_cli

SEED = (EXAMPLES / "rmsnorm" / "seed.py").read_text()
BROKEN = "import torch\n\ndef kernel(x, weight, eps):\n    return torch.empty_like(x)[\n"


def test_hostile_edits_are_refused(tmp_path: Path) -> None:
    run, config, _ = prepare_run(
        EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu", budget=10)
    )
    session = RunSession(run, config)
    tools = AgentTools(session, KnowledgeBase(), "hostile")
    try:
        # Paths outside the workspace are refused before anything is written.
        for path in ("../run.json", "/tmp/evil.py", "../.git/config"):
            assert tools.call("write_file", {"path": path, "content": "x"}).startswith("error:")
        assert "outside the workspace" in tools.call("read_file", {"path": "../run.json"})
        assert tools.call("no_such_tool", {}).startswith("error: no tool")
        assert tools.call("edit_file", "{not json").startswith("error:")

        # A kernel that does not even parse: evaluated once, refused, diagnostics returned.
        tools.call("write_file", {"path": "kernel.py", "content": BROKEN})
        answer = tools.call("commit", {"message": "faster"})
        assert answer.startswith("not committed") and "error" in answer and "syntax error" in answer

        # Insisting costs nothing and changes nothing: a rejection stays a rejection.
        again = tools.call("commit", {"message": "please"})
        assert again.startswith("not committed") and session.evaluations_done() == 1
        # (A batch-dependent commit through the tools is refused in test_evolution_openai.)

        assert session.versions() == []
        head_kernel = Lineage(run.root).show("HEAD", "workspace/kernel.py")
        assert head_kernel == SEED
        assert [a.outcome for a in session.journal.attempts()] == ["error"]
    finally:
        session.close()
    assert not (tmp_path / "evil.py").exists() and (run.root / "run.json").read_text().startswith("{")


# Written at import: what a candidate could reach of the run by its own path or by relative paths.
REACHES_FOR_THE_RUN = """import os
from pathlib import Path

for root in (Path.cwd(), Path.cwd().parent, *Path(__file__).resolve().parents[:3]):
    if not (root / "run.json").is_file():  # only a nodice run's folder (never the tests' checkout)
        continue
    for name in ("results.sqlite", "state.json", "run.json", ".git/HEAD"):
        if (root / name).is_file() and os.access(root / name, os.W_OK):
            (root / name).write_text("overwritten by a candidate")
"""


def test_a_candidate_cannot_reach_the_run_by_its_paths(tmp_path: Path) -> None:
    run, _, _ = prepare_run(EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu", budget=10))
    (run.workspace / "kernel.py").write_text(REACHES_FOR_THE_RUN + SEED)
    kept = {name: (run.root / name).read_bytes() for name in ("run.json", ".git/HEAD")}
    # As an agent's command calls it: from the workspace, beside the journal and the lineage.
    proc = run_cli("run", "eval", "--run-dir", str(run.root), cwd=run.workspace, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {name: (run.root / name).read_bytes() for name in kept} == kept
    assert [a.outcome for a in Journal(run.store_path).attempts()] == ["eligible"]  # judged as usual
