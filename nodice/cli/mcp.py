"""``nodice mcp``: serve a run's tools to a coding agent over the Model Context Protocol."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from nodice.cli.common import fail
from nodice.cli.run import RunDirOption, open_session


def mcp(
    run_dir: RunDirOption = None,
    transport: Annotated[
        str, typer.Option(help="stdio (the agent launches this command) or http (streamable HTTP)")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="with --transport http: the address to listen on")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=1, max=65535, help="with --transport http: the port (the endpoint is /mcp)")
    ] = 8765,
    agent: Annotated[
        str, typer.Option(help="the name the run's journal records for this agent's attempts")
    ] = "mcp",
) -> None:
    """Serve the run's tools (gate, benchmark, profile, lineage, knowledge, commit, status) over MCP."""
    if transport not in ("stdio", "http"):
        fail(f"unknown transport '{transport}' (use stdio or http)")
    if not agent.strip():
        fail("--agent needs a name")
    try:
        from nodice.integrations.mcp_server import RunTools, serve
    except ImportError as exc:
        fail(f"nodice mcp needs the MCP SDK: pip install 'nodice[mcp]' ({exc})")
    if transport == "http":
        problem = _cannot_listen(host, port)
        if problem:
            fail(f"nodice mcp cannot listen on {host}:{port}: {problem}")
    run = RunTools(lambda: open_session(run_dir), agent.strip())
    serve(run, "stdio" if transport == "stdio" else "streamable-http", host, port)


def _cannot_listen(host: str, port: int) -> str:
    """Why the HTTP server could not bind ``host:port`` ("" when it can): said before the server starts,
    where the server itself would log it and exit 3."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"unknown host ({exc.strerror or exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # As the server binds: a port in TIME_WAIT after an earlier server is free to reuse.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return ""


def register(app: typer.Typer) -> None:
    app.command()(mcp)
