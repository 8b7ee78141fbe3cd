"""Serving an MCP server built here: stdio (what client configs launch) or streamable HTTP."""

from __future__ import annotations

from typing import Any, Literal

from mcp.server import Server

Transport = Literal["stdio", "http"]


async def serve(
    server: Server[Any],
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
) -> None:
    """Run ``server`` until the client goes away (stdio) or the process is stopped (HTTP)."""
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        # stdio_server moves fd 1 aside while serving: a stray print cannot corrupt the wire.
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
