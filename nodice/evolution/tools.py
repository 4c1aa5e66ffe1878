"""The agent's tool set: files, gate, benchmark, profile, knowledge, lineage, commit.

Every tool takes JSON-able arguments and returns text, so the same set serves
OpenAI-style function calling, Anthropic tool use and the built-in operator.
A tool never raises for a bad request: it answers ``error: …`` and the agent
can correct itself. File tools are confined to the run's workspace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodice.errors import NodiceError
from nodice.evolution.journal import Attempt
from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.profiling import profile_candidate
from nodice.evolution.rundir import KERNEL_FILE
from nodice.evolution.scores import score_brief, standing_text
from nodice.evolution.session import RunSession

_MAX_READ = 60_000


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def anthropic(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


def _schema(required: list[str] | None = None, **props: tuple[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
        "required": required or [],
    }


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "task_info",
        "The task: kernel signature, workloads, the unit the score is measured in (TFLOP/s or GB/s).",
        _schema(),
    ),
    ToolSpec("list_files", "List the workspace's source files.", _schema()),
    ToolSpec(
        "read_file",
        "Read a workspace file (default kernel.py).",
        _schema(path=("string", "path relative to the workspace")),
    ),
    ToolSpec(
        "write_file",
        "Replace a workspace file's whole content.",
        _schema(["path", "content"], path=("string", "relative path"), content=("string", "new content")),
    ),
    ToolSpec(
        "edit_file",
        "Replace one exact, unique occurrence of old_text with new_text in a workspace file.",
        _schema(
            ["old_text", "new_text"],
            path=("string", "relative path (default kernel.py)"),
            old_text=("string", "text to find, exactly once"),
            new_text=("string", "replacement"),
        ),
    ),
    ToolSpec(
        "run_gate",
        "Run the batch-invariance gate (static analysis, correctness, dynamic BI) on the workspace, "
        "without the benchmark. Costs one evaluation of the budget.",
        _schema(message=("string", "what this edit tries (recorded with the attempt)")),
    ),
    ToolSpec(
        "benchmark",
        "Run the whole gate and the benchmark on the workspace: verdict, per-workload throughput beside "
        "every library baseline's (and the ratio to each), the geomean throughput, its ratio to the "
        "fastest baseline, the fraction of the device's limit reached, and whether it may be committed. "
        "Costs one evaluation of the budget.",
        _schema(message=("string", "what this edit tries (recorded with the attempt)")),
    ),
    ToolSpec("profile", "Profile the workspace kernel on the GPU (top device kernels).", _schema()),
    ToolSpec(
        "search_knowledge",
        "Search the knowledge base (Triton on Hopper, BI repairs, online softmax, split-KV, tiling).",
        _schema(["query"], query=("string", "keywords")),
    ),
    ToolSpec(
        "list_lineage",
        "Committed versions with their geomean and per-workload throughput, oldest first.",
        _schema(),
    ),
    ToolSpec(
        "show_version",
        "The source of a committed version, or its diff against its parent.",
        _schema(
            ["version"],
            version=("integer", "version number"),
            diff=("boolean", "show the diff against the previous version instead of the source"),
        ),
    ),
    ToolSpec(
        "commit",
        "Commit the workspace as a new version. Allowed only if it passes the whole gate and its "
        "geomean throughput is at least the best so far; unbenchmarked sources are evaluated first.",
        _schema(["message"], message=("string", "what changed and why it is faster")),
    ),
)


class AgentTools:
    """The tools bound to one run session; ``call`` dispatches a tool call by name."""

    def __init__(self, session: RunSession, knowledge: KnowledgeBase, agent: str):
        self.session = session
        self.knowledge = knowledge
        self.agent = agent
        self.last_attempt: Attempt | None = None
        self._handlers: dict[str, Callable[..., str]] = {
            "task_info": self.task_info,
            "list_files": self.list_files,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "run_gate": self.run_gate,
            "benchmark": self.benchmark,
            "profile": self.profile,
            "search_knowledge": self.search_knowledge,
            "list_lineage": self.list_lineage,
            "show_version": self.show_version,
            "commit": self.commit,
        }

    def call(self, name: str, arguments: dict[str, Any] | str | None) -> str:
        handler = self._handlers.get(name)
        if handler is None:
            return f"error: no tool named '{name}' (tools: {', '.join(self._handlers)})"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return f"error: arguments are not valid JSON: {exc}"
        if not isinstance(arguments, dict):
            return "error: arguments must be a JSON object"
        try:
            return handler(**arguments)
        except TypeError as exc:
            return f"error: bad arguments for {name}: {exc}"
        except NodiceError as exc:
            return f"error: {exc.line()}"

    # ---- task and files ---------------------------------------------------------
    def task_info(self) -> str:
        from nodice.tasks import get_task

        task = get_task(self.session.config.task)
        d = task.describe()
        device = self.session.config.device
        return (
            f"task {d['name']} ({d['family']}; the sample that must be batch-invariant: {d['sample']})\n"
            f"signature: {d['signature']}\n"
            f"device: {device} (on cpu, Triton runs under its interpreter in float32)\n"
            f"workloads: {json.dumps(d['workloads'])}\n"
            f"{score_brief(task.unit)}\n"
            "A candidate that fails the gate is never committed."
        )

    def list_files(self) -> str:
        files = self.session.run.workspace_files()
        return "\n".join(f"{k} ({len(v.splitlines())} lines)" for k, v in files.items()) or "(empty)"

    def read_file(self, path: str = KERNEL_FILE) -> str:
        target = self.session.run.resolve_in_workspace(path)
        if not target.is_file():
            return f"error: no such file in the workspace: {path}"
        text = target.read_text(encoding="utf-8", errors="replace")
        return text if len(text) <= _MAX_READ else text[:_MAX_READ] + "\n… (truncated)"

    def write_file(self, path: str, content: str) -> str:
        target = self.session.run.resolve_in_workspace(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {path} ({len(content.splitlines())} lines)"

    def edit_file(self, old_text: str, new_text: str, path: str = KERNEL_FILE) -> str:
        target = self.session.run.resolve_in_workspace(path)
        if not target.is_file():
            return f"error: no such file in the workspace: {path}"
        text = target.read_text(encoding="utf-8")
        count = text.count(old_text) if old_text else 0
        if count != 1:
            return f"error: old_text occurs {count} times in {path}; it must occur exactly once"
        target.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
        return f"edited {path}"

    # ---- evaluation ----------------------------------------------------------------
    def _evaluate(self, bench: bool, label: str, message: str) -> str:
        attempt = self.session.evaluate(agent=self.agent, label=label, description=message, bench=bench)
        self.last_attempt = attempt
        return f"attempt #{attempt.id}\n{attempt.feedback}"

    def run_gate(self, message: str = "") -> str:
        return self._evaluate(False, "run_gate", message)

    def benchmark(self, message: str = "") -> str:
        return self._evaluate(True, "benchmark", message)

    def profile(self) -> str:
        run = self.session.run
        snapshot = run.snapshot(run.workspace_files())
        try:
            return profile_candidate(
                snapshot / KERNEL_FILE, self.session.config.task, self.session.config.entry
            )
        finally:
            import shutil

            shutil.rmtree(snapshot, ignore_errors=True)

    # ---- knowledge and lineage ---------------------------------------------------
    def search_knowledge(self, query: str) -> str:
        return self.knowledge.render_search(query, k=3)

    def list_lineage(self) -> str:
        versions = self.session.versions()
        if not versions:
            return "no committed version yet"
        lines = []
        for v in versions:
            scores = ", ".join(f"{s['workload']}={s.get('score', 0):.4g}" for s in v.scores)
            standing = standing_text(v.geomean, v.unit, v.ratio_best)
            by = "" if v.island is None else f" (island {v.island})"
            lines.append(f"v{v.version}{by} {v.sha[:10]} geomean {standing} [{scores}] — {v.description}")
        return "\n".join(lines)

    def show_version(self, version: int, diff: bool = False) -> str:
        versions = {v.version: v for v in self.session.versions()}
        v = versions.get(int(version))
        if v is None:
            return f"error: no version v{version} (have {sorted(versions)})"
        if diff:
            if v.parent_version is None and v.version == min(versions):
                return f"(v{v.version} is the seed: no earlier version to compare with)"
            before = versions.get(v.parent_version) if v.parent_version is not None else None
            base = before.sha if before else self.session.lineage.root_commit()
            return self.session.lineage.diff(base, v.sha) or "(no change in the workspace)"
        return self.session.lineage.show(v.sha, f"workspace/{KERNEL_FILE}")

    def commit(self, message: str) -> str:
        result = self.session.commit(agent=self.agent, description=message)
        if result.attempt is not None:
            self.last_attempt = result.attempt
        return ("committed: " if result.committed else "not committed: ") + result.message
