"""Plain HTTP/1.1 over keep-alive connections, for the lean ``tools/call`` leg.

httpx's layers (client, transport, connection pool, h11 state machine) were the largest
part of the proxy's CPU per relayed call. A POST to an ``http://`` upstream and its
answer — ``Content-Length`` or chunked, JSON or an SSE stream — need much less: one request
written in one go, and an answer parsed by httptools (llhttp, the C parser uvicorn runs on)
as it arrives. Used only where
nothing else applies to the request (plain ``http://``, no proxy from the environment, the
asyncio event loop); otherwise the lean leg goes through httpx.

A connection goes back to the idle list only after its answer was read to the end; one
left mid-answer (a cancelled call) is closed, which is how a 2026-07-28 upstream learns
of the cancellation. An idle connection the upstream closed, or one idle longer than
:data:`IDLE_S`, is not reused.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple
from urllib.parse import urlsplit

import anyio
import httptools
import sniffio

#: Idle connections older than this are dropped (servers close them: uvicorn after 5 s).
IDLE_S = 2.0
#: The longest status line plus headers read.
HEAD_LIMIT = 64 * 1024
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_UNSAFE = re.compile(r"[\r\n\x00]")


class WireError(Exception):
    """The connection failed or the answer is not HTTP/1.1 as expected."""


class _Framing:
    """httptools' callbacks for one answer: the head, then body parts as they arrive."""

    def __init__(self) -> None:
        self.parser: httptools.HttpResponseParser | None = None
        self.headers: dict[str, str] = {}
        self.head_done = False
        self.keep_alive = False
        self.done = False
        self.parts: list[bytes] = []

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        # a repeated field joins with a comma (RFC 9110 §5.3)
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.head_done = True
        # read now: once the message is complete the parser has moved on to the next one
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.parts.append(bytes(body))

    def on_message_complete(self) -> None:
        self.done = True


class Answer:
    """One HTTP answer: status, headers (lower-case names), and a body read on demand.

    The framing — status line, headers, ``Content-Length``, chunked encoding, an answer that
    ends with its connection — is parsed by httptools (llhttp, the parser uvicorn runs on).
    """

    def __init__(
        self, reader: asyncio.StreamReader, parser: httptools.HttpResponseParser, framing: _Framing
    ) -> None:
        self.status: int = parser.get_status_code()
        self.headers = framing.headers
        self.complete = False
        self._reader = reader
        self._parser = parser
        self._framing = framing
        self._chunks = self._read()

    @property
    def reusable(self) -> bool:
        """Read to its end, and the upstream keeps the connection (``should_keep_alive``)."""
        return self.complete and self._framing.keep_alive

    async def body(self, limit: int) -> bytes:
        parts, size = [], 0
        async for part in self.chunks():
            size += len(part)
            if size > limit:
                raise WireError(f"the answer is larger than {limit} bytes")
            parts.append(part)
        return b"".join(parts)

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; one reader, so a later call continues where one left."""
        return self._chunks

    async def finish(self, within: float) -> bool:
        """Read what is left of the answer (an SSE stream's end after the event awaited)
        for at most ``within`` seconds; True when it ended, so the connection is reusable."""
        with anyio.move_on_after(within):
            async for _ in self._chunks:
                pass
        return self.complete

    async def _read(self) -> AsyncIterator[bytes]:
        framing = self._framing
        while True:
            if framing.parts:
                parts, framing.parts = framing.parts, []
                for part in parts:
                    yield part
            if framing.done:
                break
            data = await self._reader.read(1 << 20)
            if not data:
                if "content-length" in self.headers or "chunked" in self.headers.get(
                    "transfer-encoding", ""
                ):
                    raise WireError("the connection closed before the answer's end")
                return  # an answer that ends with its connection: not reusable
            _feed(self._parser, data)
        self.complete = True

    async def events(self, max_event_size: int) -> AsyncIterator[Event]:
        """Server-sent events; data lines joined with newlines. A block with only an ``id``
        or a ``retry`` (a priming event) is an event with empty data."""
        buffer = b""
        async for chunk in self.chunks():
            buffer += chunk
            while match := _EVENT_END.search(buffer):
                block, buffer = buffer[: match.start()], buffer[match.end() :]
                if len(block) > max_event_size:
                    raise WireError(f"a server-sent event larger than {max_event_size} bytes")
                if event := _event(block):
                    yield event
            if len(buffer) > max_event_size:
                raise WireError(f"a server-sent event larger than {max_event_size} bytes")
        if buffer.strip() and (event := _event(buffer)):
            yield event


class Event(NamedTuple):
    """One server-sent event: its type, data, and the ``id`` and ``retry`` it set, if any."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


def _event(block: bytes) -> Event | None:
    kind, data = "message", []
    event_id: str | None = None
    retry: int | None = None
    for line in block.decode("utf-8", errors="replace").splitlines():
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            kind = value
        elif name == "id" and "\0" not in value:  # the SSE spec ignores an id with NUL
            event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    if not data and event_id is None and retry is None:
        return None
    return Event(kind, "\n".join(data), event_id, retry)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        return not self.reader.at_eof() and now - self.idle_since < IDLE_S

    def close(self) -> None:
        self.writer.close()


class PlainHTTP:
    """Keep-alive HTTP/1.1 POSTs to one ``http://`` URL."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "localhost"
        self.port = parts.port or 80
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rpartition("@")[2]
        self._prefix = f"POST {self.target} HTTP/1.1\r\nhost: {host_header}\r\n"
        self._idle: list[_Connection] = []

    @classmethod
    def usable_for(cls, url: str) -> PlainHTTP | None:
        """A client for ``url``, or None where httpx must do it (TLS, a proxy, not asyncio)."""
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.username or parts.password:
            return None
        try:
            if sniffio.current_async_library() != "asyncio":
                return None
        except sniffio.AsyncLibraryNotFoundError:
            return None
        proxies = urllib.request.getproxies()
        if proxies and not urllib.request.proxy_bypass(parts.hostname or ""):
            return None
        return cls(url)

    @asynccontextmanager
    async def post(self, body: bytes, headers: dict[str, str]) -> AsyncIterator[Answer]:
        """POST ``body``; the answer's body must be read inside the block to reuse the
        connection."""
        connection = await self._connection()
        answer: Answer | None = None
        try:
            head = [self._prefix, f"content-length: {len(body)}\r\n"]
            for name, value in headers.items():
                if _UNSAFE.search(name) or _UNSAFE.search(value):  # no header injection
                    raise WireError(f"refusing a header with a line break or NUL: {name!r}")
                head.append(f"{name}: {value}\r\n")
            head.append("\r\n")
            connection.writer.write("".join(head).encode("latin-1") + body)
            answer = await _read_head(connection.reader)
            yield answer
        finally:
            if answer is not None and answer.reusable:
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            else:
                connection.close()

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()

    async def _connection(self) -> _Connection:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable(now):
                return connection
            connection.close()
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=HEAD_LIMIT)
        except OSError as exc:
            raise WireError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        return _Connection(reader, writer)


def _feed(parser: httptools.HttpResponseParser, data: bytes) -> None:
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        raise WireError("the upstream switched protocols") from None
    except httptools.HttpParserError as exc:
        raise WireError(f"a malformed answer: {exc}") from None


async def _read_head(reader: asyncio.StreamReader) -> Answer:
    """Read and parse up to the end of the head (body bytes that came with it are kept)."""
    framing = _Framing()
    parser = framing.parser = httptools.HttpResponseParser(framing)
    seen = 0
    while not framing.head_done:
        data = await reader.read(HEAD_LIMIT)
        if not data:
            raise WireError("the connection closed before an answer")
        seen += len(data)
        _feed(parser, data)
        if not framing.head_done and seen > HEAD_LIMIT:
            raise WireError("the answer's headers are too long")
    return Answer(reader, parser, framing)
