"""``nodice mcp``: the run's tools as a Model Context Protocol server, for the coding agents people run.

The tools are the run's own (:class:`nodice.evolution.tools.AgentTools`, the set LLM agents get):
every evaluation goes through :class:`~nodice.evolution.session.RunSession` and is journaled in the
run's store as ``nodice run eval`` journals it, and every commit through the one commit rule. File
tools write inside the workspace only. Each result is the tool's compact text (what ``nodice run``
prints) as content and a typed object as structured content.

The session is not thread-safe and its SQLite connection belongs to the thread that opened it, so
one worker thread opens it and runs every call, one at a time, in the order they arrive.
"""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from nodice.evolution.knowledge import KnowledgeBase
from nodice.evolution.session import RunSession
from nodice.evolution.status import run_status
from nodice.evolution.tools import AgentTools
from nodice.integrations.mcp_models import CommitResult, EvaluationResult, Lineage, Status, Text, Version

Transport = Literal["stdio", "streamable-http"]
_T = TypeVar("_T")

INSTRUCTIONS = """\
nodice's tools for one evolution run. Edit kernel.py in the run's workspace (your working folder, \
or write_file/edit_file here), then `benchmark` (or `run_gate` for the gate alone); each costs one \
evaluation of the run's budget. `commit` keeps the workspace as a new version only if it passes the \
whole batch-invariance gate and is at least as fast as the best version; a rejection comes back with \
its diagnostics (mechanism, dependency path, repair, first mismatch): repair the cause first. \
`status` gives the budget left and the supervisor's direction."""

# Tools are declared without `from __future__ import annotations`: the SDK reads these hints at run time.
Message = Annotated[str, Field(description="what this edit tries; recorded with the attempt")]
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


class RunTools:
    """One run session, opened and used on one worker thread; ``call`` runs a function there."""

    def __init__(self, open_session: Callable[[], RunSession], agent: str):
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="nodice-mcp")
        self.tools: AgentTools = self._thread.submit(self._open, open_session, agent).result()

    @staticmethod
    def _open(open_session: Callable[[], RunSession], agent: str) -> AgentTools:
        session = open_session()
        folders = [Path(d) for d in session.config.knowledge_dirs]
        return AgentTools(session, KnowledgeBase(folders), agent)

    @property
    def session(self) -> RunSession:
        return self.tools.session

    async def call(self, fn: Callable[[], _T]) -> _T:
        return await asyncio.wrap_future(self._thread.submit(fn))

    def close(self) -> None:
        self._thread.submit(self.session.close).result()
        self._thread.shutdown()


def _result(summary: str, structured: BaseModel | None = None) -> CallToolResult:
    """The compact text as content; an ``error: …`` answer of the run's tools is an error result."""
    if summary.startswith("error: "):
        return CallToolResult(content=[TextContent(type="text", text=summary)], is_error=True)
    data = structured.model_dump(mode="json") if structured is not None else {"summary": summary}
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=data)


def build_server(run: RunTools) -> MCPServer[Any]:
    """The MCP server of one open run."""
    tools = run.tools
    server: MCPServer[Any] = MCPServer("nodice", instructions=INSTRUCTIONS)

    async def text_tool(name: str, **arguments: Any) -> CallToolResult:
        summary = await run.call(lambda: tools.call(name, arguments))
        return _result(summary, Text(summary=summary))

    async def evaluation(name: str, message: str) -> CallToolResult:
        def judge() -> tuple[str, EvaluationResult | None]:
            tools.last_attempt = None
            summary = tools.call(name, {"message": message})
            attempt = tools.last_attempt
            return summary, EvaluationResult.of(attempt) if attempt is not None else None

        summary, structured = await run.call(judge)
        return _result(summary, structured)

    @server.tool(annotations=_READ)
    async def task_info() -> Annotated[CallToolResult, Text]:
        """The task: kernel signature, the sample that must be batch-invariant, workloads, score unit."""
        return await text_tool("task_info")

    @server.tool(annotations=_READ)
    async def status() -> Annotated[CallToolResult, Status]:
        """Evaluations done and left, the best version, rejections so far, the supervisor's direction."""

        def answer() -> Status:
            return Status.of(run_status(run.session), run.session.best())

        current = await run.call(answer)
        return _result(current.summary, current)

    @server.tool(annotations=_WRITE)
    async def run_gate(message: Message = "") -> Annotated[CallToolResult, EvaluationResult]:
        """The batch-invariance gate (static analysis, correctness, dynamic validation) on the workspace,
        without the benchmark: verdict and diagnostics. Costs one evaluation of the budget."""
        return await evaluation("run_gate", message)

    @server.tool(annotations=_WRITE)
    async def benchmark(message: Message = "") -> Annotated[CallToolResult, EvaluationResult]:
        """The whole gate and the benchmark on the workspace: verdict, diagnostics, per-workload
        throughput beside each library baseline, the geomean, and whether it may be committed.
        Costs one evaluation of the budget."""
        return await evaluation("benchmark", message)

    @server.tool(annotations=_WRITE)
    async def commit(
        message: Annotated[str, Field(description="what changed and why it is faster")],
    ) -> Annotated[CallToolResult, CommitResult]:
        """Commit the workspace as a new version. Allowed only if it passes the whole gate and its geomean
        is at least the best so far; a source never benchmarked is evaluated first (one evaluation)."""

        def decide() -> CommitResult:
            tools.last_attempt = None
            summary = tools.call("commit", {"message": message})
            attempt = tools.last_attempt
            committed = summary.startswith("committed: ")
            return CommitResult(
                summary=summary,
                committed=committed,
                version=attempt.version if committed and attempt is not None else None,
                evaluation=EvaluationResult.of(attempt) if attempt is not None else None,
            )

        decision = await run.call(decide)
        return _result(decision.summary, decision)

    @server.tool(annotations=_READ)
    async def profile() -> Annotated[CallToolResult, Text]:
        """Profile the workspace kernel on the GPU (its top device kernels)."""
        return await text_tool("profile")

    @server.tool(annotations=_READ)
    async def list_lineage() -> Annotated[CallToolResult, Lineage]:
        """Committed versions with their geomean and per-workload scores, oldest first."""

        def answer() -> Lineage:
            return Lineage(
                summary=tools.list_lineage(), versions=[Version.of(v) for v in run.session.versions()]
            )

        lineage = await run.call(answer)
        return _result(lineage.summary, lineage)

    @server.tool(annotations=_READ)
    async def show_version(
        version: Annotated[int, Field(description="version number")],
        diff: Annotated[bool, Field(description="the diff against its parent instead of the source")] = False,
    ) -> Annotated[CallToolResult, Text]:
        """The source of a committed version's kernel.py, or its diff against the version before it."""
        return await text_tool("show_version", version=version, diff=diff)

    @server.tool(annotations=_READ)
    async def search_knowledge(
        query: Annotated[str, Field(description="keywords")],
    ) -> Annotated[CallToolResult, Text]:
        """Search the knowledge base: Triton on Hopper, batch-invariance repairs, split-KV, tiling."""
        return await text_tool("search_knowledge", query=query)

    @server.tool(annotations=_READ)
    async def list_files() -> Annotated[CallToolResult, Text]:
        """The workspace's source files."""
        return await text_tool("list_files")

    @server.tool(annotations=_READ)
    async def read_file(
        path: Annotated[str, Field(description="relative to the workspace")] = "kernel.py",
    ) -> Annotated[CallToolResult, Text]:
        """Read a workspace file."""
        return await text_tool("read_file", path=path)

    @server.tool(annotations=_WRITE)
    async def write_file(
        path: Annotated[str, Field(description="relative to the workspace")],
        content: Annotated[str, Field(description="the file's new content")],
    ) -> Annotated[CallToolResult, Text]:
        """Replace a workspace file's whole content (nothing outside the workspace can be written)."""
        return await text_tool("write_file", path=path, content=content)

    @server.tool(annotations=_WRITE)
    async def edit_file(
        old_text: Annotated[str, Field(description="text to find, exactly once")],
        new_text: Annotated[str, Field(description="its replacement")],
        path: Annotated[str, Field(description="relative to the workspace")] = "kernel.py",
    ) -> Annotated[CallToolResult, Text]:
        """Replace one exact, unique occurrence of old_text with new_text in a workspace file."""
        return await text_tool("edit_file", old_text=old_text, new_text=new_text, path=path)

    return server


def serve(run: RunTools, transport: Transport, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until the client disconnects (stdio) or the process is stopped (HTTP)."""
    server = build_server(run)
    try:
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host=host, port=port)
    finally:
        run.close()
