"""Serving an MCP server built here: stdio (what client configs launch) or streamable HTTP.

Stopping is orderly on both: SIGTERM or SIGINT cancels the requests in flight — a held
call's request is withdrawn (audited) rather than left pending until its deadline — and
then the process exits. Over HTTP, ``auth_token`` requires ``Authorization: Bearer …`` on
every request (compared in constant time), on top of the SDK's Host/Origin checks, and a
request body over ``max_body_bytes`` is refused with a JSON-RPC error that names the limit
(:class:`BodyLimit`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import signal
import stat
import weakref
from typing import Any, Literal, cast

import anyio
from mcp.server import Server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Transport = Literal["stdio", "http"]

log = logging.getLogger("signoff.mcp")

#: Proxies built to serve every client in one session (``ProxyOptions(per_session=False)``).
_ONE_SESSION: weakref.WeakSet[Server[Any]] = weakref.WeakSet()
ONE_SESSION_OVER_HTTP = (
    "this proxy was built with ProxyOptions(per_session=False): every HTTP client shares one "
    "session — one thread, so an approval for the whole thread given to one client covers "
    "every client's calls, and one set of upstream connections. Build it with "
    "per_session=True, as `signoff mcp-proxy --transport http` does"
)


def serves_one_session(server: Server[Any]) -> None:
    """Mark ``server`` as serving all its clients in one session (said if served over HTTP)."""
    _ONE_SESSION.add(server)


#: Seconds uvicorn waits for open streams (held calls) after a stop signal before it
#: cancels them; their requests are withdrawn either way.
GRACEFUL_SHUTDOWN_S = 3
#: Seconds a request body may take to arrive (the CLI passes the policy's serve.body_timeout).
BODY_TIMEOUT_S = 10.0


async def serve(
    server: Server[Any],
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8767,
    path: str = "/mcp",
    auth_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    body_timeout: float | None = BODY_TIMEOUT_S,
) -> None:
    """Run ``server`` until the client goes away (stdio) or the process is stopped."""
    if transport == "stdio":
        await _serve_stdio(server)
        return
    import uvicorn

    if server in _ONE_SESSION:
        log.warning(ONE_SESSION_OVER_HTTP)
    app: ASGIApp = BodyLimit(
        server.streamable_http_app(
            streamable_http_path=path, host=host, max_request_body_size=max_body_bytes
        ),
        max_body_bytes,
        body_timeout,
    )
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


def body_limit_for(max_args_bytes: int) -> int:
    """The HTTP body limit that lets through every call the policy's ``limits.max_args_bytes``
    allows (a client's JSON may spell a character in up to 3x its canonical bytes, as
    ``\\ud83d\\ude00``), and never less than the SDK's 4 MiB: a call over the policy's limit
    still reaches the gate, which refuses it naming that limit and the argument."""
    return max(DEFAULT_MAX_REQUEST_BODY_SIZE, 3 * max_args_bytes + 65536)


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is answered 413 with a JSON-RPC
    error that says so (MCP clients show a JSON-RPC error's message; the SDK's own check
    answers plain text, which they show as "Server returned an error response"), and the
    refusal is logged. Nothing reaches the server: no session, no gate, no request stored.

    A body with a ``Content-Length`` over the limit is refused by it (the HTTP server never
    reads past it); otherwise the body is read here, counted as it arrives, and replayed to
    the app once whole — within ``body_timeout`` seconds, else a 408 (a client that stalls
    or trickles its body cannot hold a request open for ever; the SDK sets no such limit)."""

    def __init__(self, app: ASGIApp, limit: int, body_timeout: float | None = None) -> None:
        self.app = app
        self.limit = limit
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, send, f"{declared} bytes")
            return
        buffered: list[Message] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    buffered.append(message)
                    if message["type"] != "http.request":
                        break
                    size += len(message.get("body", b""))
                    if size > self.limit:
                        await self._refuse(scope, send, f"more than {self.limit} bytes (chunked)")
                        return
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await self._late(scope, send, size)
            return

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send, size: str) -> None:
        log.warning(
            "refused a request body of %s from %s: over the MCP HTTP limit of %d bytes",
            size,
            _who(scope),
            self.limit,
        )
        message = (
            f"the request body ({size}) is over this server's limit of {self.limit} bytes; "
            "nothing was run or stored. Tool arguments are limited by the policy's "
            "limits.max_args_bytes, which also sets this limit (3x it, at least 4 MiB)."
        )
        await _json_rpc_error(send, 413, message)

    async def _late(self, scope: Scope, send: Send, size: int) -> None:
        log.warning(
            "gave up on a request body from %s after %g s (%d bytes had arrived)",
            _who(scope),
            self.body_timeout,
            size,
        )
        message = (
            f"the request body did not arrive within {self.body_timeout:g} s "
            "(serve.body_timeout); nothing was run or stored. Send the whole body at once."
        )
        # the client still owes part of its body: close rather than wait for the rest
        await _json_rpc_error(send, 408, message, close=True)


def _who(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "a client"


async def _json_rpc_error(send: Send, status: int, message: str, *, close: bool = False) -> None:
    """A JSON-RPC error with no id (the request was never read), which MCP clients show as the
    call's error (the SDK's client reads a JSON-RPC error from any non-2xx answer)."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    """The announced length; None without one, or for one the server would refuse anyway."""
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            return int(value) if value.strip().isdigit() and len(value) < 20 else None
    return None
