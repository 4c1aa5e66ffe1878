"""Agents as islands on one lineage: both evaluate, commits stay one linear history, each sees the
other's commits; command islands resume after a driver kill, LLM islands judge through the driver's
executor (a scripted OpenAI-compatible server on loopback stands in for the model)."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from nodice.evaluation.executor import ExecutorConfig
from nodice.evolution.agents.base import Agent
from nodice.evolution.agents.openai_agent import OpenAIAgent
from nodice.evolution.agents.rmsnorm_template import RowKnobs, render
from nodice.evolution.engine import Engine
from nodice.evolution.journal import Journal
from nodice.evolution.lineage import Lineage
from nodice.evolution.start import EvolveOptions, prepare_run
from tests.conftest import ROOT, run_cli
from tests.test_evolution_openai import API_KEY, Reply, ScriptedChatServer, _last_tool_results, _tool_calls

BUDGET = 4

# A stand-in for a coding-agent CLI: keeps its prompt, writes its island's kernel (one source per
# launch), commits through nodice and exits.
AGENT = """#!/bin/sh
set -e
echo $$ >> "{folder}/pids"
n=$(ls "{folder}/prompts" | grep -c "^island$NODICE_ISLAND-" || true)
cp "$1" "{folder}/prompts/island$NODICE_ISLAND-$n.md"
cp "{folder}/variant$NODICE_ISLAND.py" kernel.py
echo "# island $NODICE_ISLAND, launch $n" >> kernel.py
nodice run commit -m "island $NODICE_ISLAND launch $n"
"""
# Both several times faster than the seed under the interpreter, far beyond timing noise.
VARIANTS = (
    RowKnobs(rows_per_program=4, single_pass=True),
    RowKnobs(rows_per_program=4, single_pass=True, tile_cap=4096),
)


def _agent(folder: Path) -> str:
    (folder / "prompts").mkdir(parents=True)
    for i, knobs in enumerate(VARIANTS):
        (folder / f"variant{i}.py").write_text(render(knobs))
    script = folder / "agent.sh"
    script.write_text(AGENT.format(folder=folder))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return f"cmd:{script} {{prompt}}"


def _evolve(run_dir: Path, agent: str) -> list[str]:
    return [
        *(sys.executable, "-m", "nodice", "evolve", "rmsnorm", "--run-dir", str(run_dir)),
        *("--device", "cpu", "--agent", agent, "--workers", "2", "--budget", str(BUDGET), "--no-report"),
    ]


def _kill_groups(pids: Path) -> None:
    for pid in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pid), signal.SIGKILL)  # an agent launch of this test (its own session)


def test_two_command_islands_share_one_lineage_and_resume_after_a_driver_kill(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "agent")
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _evolve(run_dir, agent), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    store = run_dir / "results.sqlite"
    try:
        deadline = time.monotonic() + 150
        while proc.poll() is None and time.monotonic() < deadline:
            if store.exists() and Journal(store).count() >= 2:
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, mid-run: an island is still evaluating
        _kill_groups(tmp_path / "agent" / "pids")  # and the launches it left behind
    finally:
        proc.wait(10)
    before = Journal(store).attempts()
    assert 2 <= len(before) < BUDGET, "the driver was not killed mid-run"

    again = subprocess.run(_evolve(run_dir, agent), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming the run" in again.stdout and "2 cmd islands on one lineage" in again.stdout

    attempts = Journal(store).attempts()
    assert [a.id for a in attempts[: len(before)]] == [a.id for a in before]  # nothing recorded was lost
    assert len(attempts) == BUDGET
    assert attempts[0].label == "seed" and attempts[0].island is None
    assert {a.island for a in attempts[1:]} == {0, 1}  # both islands evaluated

    # One linear lineage through the one commit rule: each commit passed the whole gate and was at
    # least as fast as the best before it, whichever island made it.
    lineage = Lineage(run_dir)
    assert lineage.git("rev-list", "--min-parents=2", "HEAD").strip() == ""
    versions = lineage.versions()
    assert [v.version for v in versions] == list(range(len(versions))) and len(versions) >= 2
    assert all(b.geomean >= a.geomean for a, b in itertools.pairwise(versions))
    by_id = {a.id: a for a in attempts}
    assert {a.id for a in attempts if a.outcome == "committed"} == {v.attempt for v in versions}
    for v in versions:
        assert by_id[v.attempt].verdict == "pass" and set(v.stages.values()) == {"pass"}, v
        assert v.island == by_id[v.attempt].island
    assert all(v.island in (0, 1) for v in versions[1:])
    assert "Nodice-Island: " in lineage.git("log", "-1", "--format=%B", versions[-1].sha)

    # An island's prompt shows a commit made by the other island.
    prompts = {p.name: p.read_text() for p in (tmp_path / "agent" / "prompts").iterdir()}
    seen = [
        (name, v.version)
        for name, text in prompts.items()
        for v in versions[1:]
        if not name.startswith(f"island{v.island}-") and f"v{v.version} by island {v.island}:" in text
    ]
    assert seen, prompts

    status = run_cli("run", "status", "--run-dir", str(run_dir))
    assert status.returncode == 0, status.stderr
    assert "island 0: " in status.stdout and "island 1: " in status.stdout
    report = run_cli("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    html = (run_dir / "report.html").read_text()
    assert f"cmd, island {versions[-1].island})" in html  # who committed the best version


def _island_turn(done: dict[int, threading.Event], lineages: dict[int, str]) -> Reply:
    """One reply of the scripted model, for whichever island's conversation asks."""

    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        island = int(re.findall(r"you are island (\d)", str(messages[1]["content"]))[0])
        step = sum(1 for m in messages if m.get("role") == "assistant")
        if step == 0:
            return _tool_calls(("write_file", {"path": "kernel.py", "content": render(VARIANTS[island])}))
        if step == 1:
            return _tool_calls(("benchmark", {}))
        if step == 2:
            return _tool_calls(("commit", {"message": f"island {island}"}))
        if step == 3:
            # Both commits are decided before either island reads the lineage.
            done[island].set()
            assert done[1 - island].wait(120), "the other island never committed"
            return _tool_calls(("list_lineage", {}))
        if step == 4:
            lineages[island] = _last_tool_results(messages)[0]
        return {"role": "assistant", "content": "I have nothing more to try."}

    return reply


def test_two_llm_islands_judge_through_the_executor_and_read_each_others_commits(tmp_path: Path) -> None:
    done = {0: threading.Event(), 1: threading.Event()}
    lineages: dict[int, str] = {}
    with ScriptedChatServer([_island_turn(done, lineages)] * 40) as server:
        options = EvolveOptions(
            task="rmsnorm", run_dir=tmp_path / "run", device="cpu", budget=4, agent="openai", model="m"
        )
        run, config, _ = prepare_run(options)
        agents: list[Agent] = [OpenAIAgent(model="m", base_url=server.url, api_key=API_KEY) for _ in "01"]
        console = Console(record=True, width=200, force_terminal=False)
        engine = Engine(
            run, config, agents[0], console=console, executor=ExecutorConfig("local", 2), islands=agents
        )
        summary = engine.execute()
    assert not server.errors, server.errors
    assert "every island stopped" in summary.stop_reason, summary.stop_reason

    attempts = Journal(run.store_path).attempts()
    assert (attempts[0].island, attempts[0].label) == (None, "seed")
    assert sorted((a.island, a.label) for a in attempts[1:]) == [(0, "benchmark"), (1, "benchmark")]
    # The two benchmarks were judged at the same time, by the driver's two workers.
    (s1, e1), (s2, e2) = [(a.created - a.elapsed_s, a.created) for a in attempts[1:]]
    assert s1 < e2 and s2 < e1
    versions = Lineage(run.root).versions()
    assert [v.version for v in versions] == list(range(len(versions))) and len(versions) >= 2
    assert all(b.geomean >= a.geomean for a, b in itertools.pairwise(versions))
    # Each island's lineage view lists every commit, the other island's included.
    assert set(lineages) == {0, 1}
    for text in lineages.values():
        assert all(
            f"v{v.version}{'' if v.island is None else f' (island {v.island})'} " in text for v in versions
        )
    assert any(f"(island {1 - k})" in text for k, text in lineages.items()), lineages
