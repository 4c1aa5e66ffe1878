"""An external agent command works in the workspace and commits through `nodice run` subcommands."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from rich.console import Console

from nodice.evolution.agents.base import AgentError
from nodice.evolution.agents.command_agent import CommandAgent
from nodice.evolution.agents.rmsnorm_template import RowKnobs, render
from nodice.evolution.engine import Engine
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.start import EvolveOptions, prepare_run

# A stand-in for a coding-agent CLI: reads its prompt, rewrites kernel.py, commits through nodice.
AGENT = """#!/bin/sh
set -e
grep -q "nodice run commit" "$1"
test "$NODICE_PROMPT_FILE" = "$1"
cp "{faster}" kernel.py
sed -i 's/next_power_of_2(hidden), 1024)/next_power_of_2(hidden), 4096)/' kernel.py
nodice run commit -m "4 rows per program, single pass, tile cap 4096"
nodice run status
"""
# Several times faster than the seed under the interpreter, far beyond timing noise.
FASTER = render(RowKnobs(rows_per_program=4, single_pass=True))


def test_command_agent_commits_through_nodice_run(tmp_path: Path) -> None:
    faster = tmp_path / "faster.py"
    faster.write_text(FASTER)
    script = tmp_path / "agent.sh"
    script.write_text(AGENT.format(faster=faster))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    run, config, _ = prepare_run(
        EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu", budget=2, agent="cmd")
    )
    console = Console(record=True, width=200, force_terminal=False)
    summary = Engine(run, config, CommandAgent(f"{script} {{prompt}}"), console=console).execute()
    log = (run.root / "logs" / "agent.log").read_text()
    assert "committed v1" in log and "best: v1" in log, log
    versions = Lineage(run.root).versions()
    assert [v.version for v in versions] == [0, 1] and versions[1].agent == "cmd"
    assert versions[1].description == "4 rows per program, single pass, tile cap 4096"
    assert "4096)" in Lineage(run.root).show(versions[1].sha, "workspace/kernel.py")
    assert [a.outcome for a in Journal(run.store_path).attempts()] == ["committed", "committed"]
    assert summary.evaluations == 2 and "budget spent" in summary.stop_reason
    assert "PROMPT.md" not in Lineage(run.root).git("ls-files")  # the prompt is not part of the kernel

    # Resumed with a command the shell cannot find: the run ends with the agent's error, not as if the
    # agent had nothing left to try, and what was committed stays.
    run, config, resumed = prepare_run(
        EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu", budget=3, agent="cmd")
    )
    assert resumed
    with pytest.raises(AgentError, match=r"could not be run \(command not found, shell exit 127\)"):
        Engine(run, config, CommandAgent("no-such-agent-cli {prompt}"), console=console).execute()
    assert [v.version for v in Lineage(run.root).versions()] == [0, 1]
