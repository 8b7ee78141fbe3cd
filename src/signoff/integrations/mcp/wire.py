"""Plain HTTP/1.1 over keep-alive connections, for the lean ``tools/call`` leg.

httpx's layers (client, transport, connection pool, h11 state machine) were the largest
part of the proxy's CPU per relayed call. A POST to an ``http://`` upstream and its
answer — ``Content-Length`` or chunked, JSON or an SSE stream — need much less: one request
written in one go, a status line and headers, a body read as it arrives. Used only where
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
from urllib.parse import urlsplit

import anyio
import sniffio

#: Idle connections older than this are dropped (servers close them: uvicorn after 5 s).
IDLE_S = 2.0
#: The longest status line plus headers read.
HEAD_LIMIT = 64 * 1024
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class WireError(Exception):
    """The connection failed or the answer is not HTTP/1.1 as expected."""


class Answer:
    """One HTTP answer: status, headers (lower-case names), and a body read on demand."""

    def __init__(self, reader: asyncio.StreamReader, status: int, headers: dict[str, str]):
        self.status = status
        self.headers = headers
        self.complete = False
        self._reader = reader
        self._chunks = self._read()

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
        reader, headers = self._reader, self.headers
        try:
            if "chunked" in headers.get("transfer-encoding", ""):
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
                    if size == 0:
                        while await reader.readuntil(b"\r\n") != b"\r\n":
                            pass  # trailers
                        break
                    data = await reader.readexactly(size + 2)
                    yield data[:-2]
            elif "content-length" in headers:
                remaining = int(headers["content-length"])
                while remaining > 0:
                    data = await reader.read(min(remaining, 1 << 20))
                    if not data:
                        raise WireError("the connection closed before the answer's end")
                    remaining -= len(data)
                    yield data
            else:
                while data := await reader.read(1 << 20):
                    yield data
                return  # read to EOF: the connection cannot be reused
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise WireError(f"a malformed or cut answer ({type(exc).__name__})") from None
        self.complete = True

    async def events(self, max_event_size: int) -> AsyncIterator[tuple[str, str]]:
        """Server-sent events as ``(event, data)``; data lines joined with newlines."""
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


def _event(block: bytes) -> tuple[str, str] | None:
    kind, data = "message", []
    for line in block.decode("utf-8", errors="replace").splitlines():
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            kind = value
    return (kind, "\n".join(data)) if data else None


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
            head += [f"{name}: {value}\r\n" for name, value in headers.items()]
            head.append("\r\n")
            connection.writer.write("".join(head).encode("latin-1") + body)
            answer = await _read_head(connection.reader)
            yield answer
        finally:
            keep = (
                answer is not None
                and answer.complete
                and answer.headers.get("connection", "").lower() != "close"
            )
            if keep:
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


async def _read_head(reader: asyncio.StreamReader) -> Answer:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        raise WireError("the connection closed before an answer") from None
    except asyncio.LimitOverrunError:
        raise WireError("the answer's headers are too long") from None
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise WireError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
    try:
        status = int(rest[:3])
    except ValueError:
        raise WireError(f"no status in {lines[0][:80]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return Answer(reader, status, headers)
