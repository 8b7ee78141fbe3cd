"""uvicorn's httptools protocol with a bound on a request head that is still arriving.

The C parser (httptools/llhttp) costs about a third of the pure-Python ``h11`` parser's CPU
per request (docs/benchmarks.md), but uvicorn gives it no header limit: a client could send
header bytes without end and httptools would buffer them. :class:`HeadLimitedHttpTools`
counts the bytes received while a request head is incomplete and, past
``serve.max_header_bytes``, answers 431 and closes the connection. A head that arrives whole
is measured exactly by :class:`~signoff.server.client_limits.ClientLimits` (also 431); this
guard is the bound on the bytes held before that, and can overshoot it by at most one read
(the bytes of one ``data_received`` that also finished the previous request).

uvicorn writes a response's head and its body with two ``transport.write`` calls, and the
event loop sends each at once: two ``send`` system calls and two TCP segments per response.
:class:`CoalescingTransport` holds a write until the next one or the end of the event loop's
current step, whichever comes first, so a head and the body written right after it leave in
one ``send``; a streamed response's (SSE) head and later chunks still leave within the step
that wrote them. Closing sends what is held first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

HEADERS_TOO_LARGE = 431


def head_too_large_message(limit: int) -> str:
    return f"the request headers exceed {limit} bytes (serve.max_header_bytes)"


class CoalescingTransport:
    """A transport whose writes made in one event-loop step leave in one ``write`` (see the
    module's docstring); everything else is the wrapped transport's."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._held = None
            self._transport.write(held + data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def writelines(self, chunks: Iterable[bytes]) -> None:
        self.write(b"".join(chunks))

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeadLimitedHttpTools(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` that refuses a request head over ``max_head_bytes`` and
    writes each response in one ``send`` (:class:`CoalescingTransport`)."""

    max_head_bytes = 32768

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # a connection starts with a request head
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing = CoalescingTransport(transport, self.loop)
        super().connection_made(coalescing)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.max_head_bytes:
            self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0

    def _refuse_head(self) -> None:
        self._in_head = False
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # a response to the previous (pipelined) request is still being written: an
            # answer now would interleave with it, so the connection just ends
            self.transport.close()
            return
        body = json.dumps(
            {
                "error": "headers_too_large",
                "message": head_too_large_message(self.max_head_bytes),
            }
        ).encode()
        self.transport.write(
            b"".join(
                [
                    STATUS_LINE[HEADERS_TOO_LARGE],
                    b"content-type: application/json\r\n",
                    b"content-length: %d\r\n" % len(body),
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()


def head_limited(max_head_bytes: int) -> type[HeadLimitedHttpTools]:
    """The protocol class for one server's ``serve.max_header_bytes``."""
    return type("HeadLimitedHttpTools", (HeadLimitedHttpTools,), {"max_head_bytes": max_head_bytes})
