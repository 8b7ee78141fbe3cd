"""Serving an MCP server built here: stdio (what client configs launch) or streamable HTTP.

Stopping is orderly on both: SIGTERM or SIGINT cancels the requests in flight — a held
call's request is withdrawn (audited) rather than left pending until its deadline — and
then the process exits. Over HTTP, ``auth_token`` requires ``Authorization: Bearer …`` on
every request (compared in constant time), on top of the SDK's Host/Origin checks.
"""

from __future__ import annotations

import hmac
import os
import signal
import stat
from typing import Any, Literal, cast

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

    stdin = cast("anyio.AsyncFile[str] | None", StdinLines.open())

    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        # stdio_server moves fd 1 aside while serving: a stray print cannot corrupt the wire.
        async with stdio_server(stdin=stdin) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


class StdinLines:
    """stdin as lines whose read a stop signal can cancel at once.

    The SDK reads stdin in a worker thread, which cancellation must wait for — until the
    client's next line, possibly never — so a stopped proxy could not get to withdrawing its
    held requests. Here a read waits on the event loop (pipes and sockets, on POSIX).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    @classmethod
    def open(cls, fd: int = 0) -> StdinLines | None:
        """For a pipe or socket on POSIX (what clients use); None: use the SDK's reader."""
        if os.name != "posix":
            return None
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return None
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return None  # a file, /dev/null, a terminal: epoll may refuse them
        return cls(fd)

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self.fd)
            chunk = os.read(self.fd, 65536)
            if not chunk:
                if not self._buffer:
                    raise StopAsyncIteration
                line, self._buffer = self._buffer, b""
                return line.decode("utf-8", errors="replace")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace") + "\n"


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
