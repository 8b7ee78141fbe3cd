"""uvicorn's httptools protocol with a bound on a request head that is still arriving.

The C parser (httptools/llhttp) costs about a third of the pure-Python ``h11`` parser's CPU
per request (docs/benchmarks.md), but uvicorn gives it no header limit: a client could send
header bytes without end and httptools would buffer them. :class:`HeadLimitedHttpTools`
counts the bytes received while a request head is incomplete and, past
``serve.max_header_bytes``, answers 431 and closes the connection. A head that arrives whole
is measured exactly by :class:`~signoff.server.client_limits.ClientLimits` (also 431); this
guard is the bound on the bytes held before that, and can overshoot it by at most one read
(the bytes of one ``data_received`` that also finished the previous request).
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

HEADERS_TOO_LARGE = 431


def head_too_large_message(limit: int) -> str:
    return f"the request headers exceed {limit} bytes (serve.max_header_bytes)"


class HeadLimitedHttpTools(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` that refuses a request head over ``max_head_bytes``."""

    max_head_bytes = 32768

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # a connection starts with a request head
        self._head_bytes = 0

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
