"""Limits on what one client may cost: the size of its request head and body, and the time
its body may take. A client that sends its headers, then stalls or trickles the body, gets a
408 and the connection closed instead of holding the server's attention for ever.

uvicorn bounds idle keep-alive connections (``serve.keep_alive_timeout``), open connections
(``serve.max_connections``) and a request head that is still arriving
(``serve.max_header_bytes``), but it accepts any head that arrives whole and waits for a body
as long as the client keeps the socket open. This middleware adds:

* a request head larger than ``serve.max_header_bytes`` → 431;
* a body larger than 1 MiB (announced, or counted as it arrives) → 413, sent once the rest
  of the body has been read and dropped (up to :data:`DRAIN_MAX_BYTES`, within the body
  timeout): a server that answers and closes while the client is still sending makes the
  client's kernel see a reset, and the client reports an unreachable server instead of the
  413 (a 10 MB body did, through ``RemoteGate``);
* the whole body within ``serve.body_timeout`` seconds, counted from the moment the app
  first reads it (every endpoint reads its body first thing) → else 408. Once the body is
  complete, ``receive`` passes straight through: event streams and long-polls wait on it
  for the client's disconnect;
* a response that starts while the client still owes part of its body (a 401 before the
  body was read, say) carries ``Connection: close``, so the unread rest cannot keep the
  connection open either.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from signoff.server.errors import ApiError, json_error

CLOSE = (b"connection", b"close")
#: The most of a refused body read (and dropped) so the client can read the 413; beyond it
#: the connection is closed at once.
DRAIN_MAX_BYTES = 16 * 1024 * 1024


class BodyTimedOut(Exception):
    """The request body did not arrive in time (raised inside the app's ``receive``)."""


class BodyTooLarge(Exception):
    """The request body grew past the cap (raised inside the app's ``receive``)."""


class ClientLimits:
    """ASGI middleware: at most ``max_header_bytes`` of headers, ``max_body_bytes`` of body,
    ``body_timeout`` seconds for the body."""

    def __init__(
        self, app: ASGIApp, *, body_timeout: float, max_header_bytes: int, max_body_bytes: int
    ) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.max_header_bytes = max_header_bytes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", ())
        if sum(len(k) + len(v) + 4 for k, v in headers) > self.max_header_bytes:
            await _refuse(scope, receive, send, 431, "headers_too_large", self._too_large())
            return
        announced = _content_length(headers)
        if announced is not None and announced > self.max_body_bytes:
            if announced <= DRAIN_MAX_BYTES:
                await _drain(receive, self.body_timeout, announced)
            await _refuse(scope, receive, send, 413, "body_too_large", self._too_big(), "body")
            return
        body = _BodyReader(receive, self.body_timeout, self.max_body_bytes, _expects_body(headers))
        started = False

        async def send_closing_if_owed(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if body.owed:
                    message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        try:
            await self.app(scope, body.receive, send_closing_if_owed)
        except (BodyTimedOut, BodyTooLarge) as exc:
            if started:
                raise  # too late to answer: uvicorn drops the connection
            if isinstance(exc, BodyTooLarge):
                if not body.done:
                    await _drain(receive, self.body_timeout, DRAIN_MAX_BYTES - body.received)
                await _refuse(scope, receive, send, 413, "body_too_large", self._too_big(), "body")
                return
            message = (
                f"the request body did not arrive within {self.body_timeout:g} s; "
                "send the whole body at once"
            )
            await _refuse(scope, receive, send, 408, "body_timeout", message, field="body")

    def _too_large(self) -> str:
        return f"the request headers exceed {self.max_header_bytes} bytes (serve.max_header_bytes)"

    def _too_big(self) -> str:
        return f"the request body is larger than {self.max_body_bytes} bytes"


async def _drain(receive: Receive, seconds: float, at_most: int) -> None:
    """Read and drop the rest of a refused body: at most ``at_most`` bytes, for at most
    ``seconds`` (a client still sending after that is cut off by the close)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while at_most > 0:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                at_most -= len(message.get("body", b""))


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    field: str | None = None,
) -> None:
    error = ApiError(status, code, message, headers={"Connection": "close"}, field=field)
    await json_error(error)(scope, receive, send)


class _BodyReader:
    """``receive`` with a deadline until the last body chunk (or a disconnect) arrives."""

    def __init__(
        self, receive: Receive, seconds: float, max_bytes: int, expects_body: bool
    ) -> None:
        self._receive = receive
        self._seconds = seconds
        self._max_bytes = max_bytes
        self.received = 0
        self._deadline: float | None = None
        self.expects_body = expects_body
        self.done = False

    @property
    def owed(self) -> bool:
        """The client announced a body and the app has not read all of it."""
        return self.expects_body and not self.done

    async def receive(self) -> Message:
        if self.done:
            return await self._receive()
        if self._deadline is None:
            self._deadline = asyncio.get_running_loop().time() + self._seconds
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            raise BodyTimedOut from None
        self.received += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.done = True
        if self.received > self._max_bytes:
            raise BodyTooLarge
        return message


def _content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.strip().isdigit() and len(value) < 20 else None
    return None


def _expects_body(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
    return False
