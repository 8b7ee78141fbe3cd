"""Serving an MCP server built here: stdio (what client configs launch) or streamable HTTP.

Stopping is orderly on both: SIGTERM or SIGINT cancels the requests in flight — a held
call's request is withdrawn (audited) rather than left pending until its deadline — and
then the process exits. Over HTTP, ``auth_token`` requires ``Authorization: Bearer …`` on
every request (compared in constant time), on top of the SDK's Host/Origin checks.
"""

from __future__ import annotations

import hmac
import signal
from typing import Any, Literal

import anyio
from mcp.server import Server
from starlette.types import ASGIApp, Receive, Scope, Send

Transport = Literal["stdio", "http"]

#: Seconds uvicorn waits for open streams (held calls) after a stop signal before it
#: cancels them; their requests are withdrawn either way.
GRACEFUL_SHUTDOWN_S = 3


async def serve(
    server: Server[Any],
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8767,
    path: str = "/mcp",
    auth_token: str | None = None,
) -> None:
    """Run ``server`` until the client goes away (stdio) or the process is stopped."""
    if transport == "stdio":
        await _serve_stdio(server)
        return
    import uvicorn

    app: ASGIApp = server.streamable_http_app(streamable_http_path=path, host=host)
    if auth_token is not None:
        app = BearerAuth(app, auth_token)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    await uvicorn.Server(config).serve()  # uvicorn handles SIGTERM/SIGINT itself


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        # stdio_server moves fd 1 aside while serving: a stray print cannot corrupt the wire.
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <token> (--auth-token)"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="signoff-mcp"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
