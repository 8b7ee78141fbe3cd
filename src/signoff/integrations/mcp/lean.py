"""A lean upstream leg for ``tools/call`` over streamable HTTP.

The SDK's client stack costs the proxy most of its CPU per relayed call: the request and
its answer cross two in-memory streams, the dispatcher and a pydantic round trip each way.
For a call the gate let through, the proxy needs none of that: it POSTs the JSON-RPC
request itself on the transport's own keep-alive HTTP client, with the headers the SDK's
session would stamp (session id, protocol version, ``Mcp-Method``/``Mcp-Name``…), and
relays the answer as a dict — parsing only the id, progress notifications, and whether
the result is an ``input_required`` one (``application/json`` and ``text/event-stream``
answers, up to :data:`~signoff.integrations.mcp.link.MAX_RESULT_BYTES` per event).

Everything else stays with the SDK: the handshake, the GET stream, listings, resources,
and any message on the call's own stream that is not its answer or its progress — an
upstream's sampling, elicitation or roots request, a log line — is handed to the SDK's
session as if its transport had read it, so the session answers it as usual.

Errors keep the SDK's meaning, so :mod:`.pool` handles both paths alike: a JSON-RPC error
is raised as :class:`MCPError`, a lost connection as ``CONNECTION_CLOSED``, a timeout as
``REQUEST_TIMEOUT``; a cancelled call closes its stream (the 2026-07-28 cancellation) and,
at 2025-11-25, also sends ``notifications/cancelled``.

A call's SSE stream that ends before its answer is resumed as the SDK's client resumes it:
when the stream gave an event ``id``, a ``GET`` with ``Last-Event-ID`` after the server's
``retry`` interval (1 s when it gave none) picks it up where it stopped — what a server
that polls (closes the stream after its priming event while a long call runs) expects. A
stream without an id, or two failed reconnections in a row, is a lost connection.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import (
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
    suppress,
)
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import (
    DEFAULT_RECONNECTION_DELAY_MS,
    LAST_EVENT_ID,
    MAX_RECONNECTION_ATTEMPTS,
    StreamableHTTPTransport,
)
from mcp.shared._context_streams import ContextSendStream, create_context_streams
from mcp.shared._httpx_utils import create_mcp_http_client, stream_within_origin
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from signoff.integrations.mcp.wire import Answer, Event, PlainHTTP, WireError

log = logging.getLogger("signoff.mcp")

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
Inbox = ContextSendStream[SessionMessage | Exception]

#: The largest JSON (not SSE) answer read; the SDK sets no limit there either.
MAX_JSON_BYTES = 1 << 30
#: How long the end of a call's SSE stream is awaited after its answer (see _keep_alive).
DRAIN_S = 0.25
#: How long a 2025-11-25 ``notifications/cancelled`` may take to send after a cancel.
CANCEL_NOTE_S = 2.0


class LeanHTTP:
    """The SDK's streamable-HTTP transport, opened here so its parts stay reachable:
    the HTTP client, the session id, and the stream the SDK's session reads from."""

    def __init__(self, url: str, *, max_event_size: int) -> None:
        self.url = url
        self.max_event_size = max_event_size
        self.transport: StreamableHTTPTransport | None = None
        self.http: httpx2.AsyncClient | None = None
        self.inbox: Inbox | None = None
        self.plain: PlainHTTP | None = None
        self._drain_s = DRAIN_S
        self._ids = itertools.count(1)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """What :func:`mcp.client.streamable_http.streamable_http_client` does."""
        transport = StreamableHTTPTransport(self.url, max_sse_event_size=self.max_event_size)
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(create_mcp_http_client())
            inbox, read_stream = create_context_streams[SessionMessage | Exception](0)
            write_stream, write_reader = create_context_streams[SessionMessage](0)
            async with (
                inbox,
                read_stream,
                write_stream,
                write_reader,
                anyio.create_task_group() as tg,
            ):

                def start_get_stream() -> None:
                    tg.start_soon(transport.handle_get_stream, http, inbox)

                tg.start_soon(
                    transport.post_writer, http, write_reader, inbox, write_stream,
                    start_get_stream, tg,
                )  # fmt: skip
                self.transport, self.http, self.inbox = transport, http, inbox
                self.plain = PlainHTTP.usable_for(self.url)
                try:
                    yield read_stream, write_stream
                finally:
                    plain, self.plain = self.plain, None
                    self.transport = self.http = self.inbox = None
                    if plain is not None:
                        await plain.aclose()
                    if transport.session_id:
                        await transport.terminate_session(http)
                    tg.cancel_scope.cancel()

    async def call_tool(
        self,
        session: Any,
        name: str,
        arguments: dict[str, Any],
        *,
        progress: ProgressFn | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One ``tools/call``; the upstream's ``result`` object as it sent it."""
        transport, http, stamp = self.transport, self.http, getattr(session, "_stamp", None)
        if transport is None or http is None or stamp is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="the upstream is not connected")
        request_id = f"signoff-{next(self._ids)}"
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if progress is not None:
            params["_meta"] = {"progressToken": request_id}
        data: dict[str, Any] = {"method": "tools/call", "params": params}
        opts: dict[str, Any] = {}
        stamp(data, opts)  # the session's _meta and headers for this protocol version
        headers = transport._prepare_headers()
        headers.update(opts.get("headers") or {})
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, **data}).encode()
        modern = headers.get("mcp-protocol-version") in MODERN_PROTOCOL_VERSIONS
        # no cancel scope to enter and leave on every relayed call without a timeout
        scope: AbstractContextManager[object] = (
            nullcontext() if timeout is None else anyio.fail_after(timeout)
        )
        try:
            with scope:
                plain = self.plain
                resume = _Resume()
                found: dict[str, Any] | None = None
                if plain is not None:
                    try:
                        found = await self._post_plain(
                            plain, body, headers, request_id, progress, resume
                        )
                    except _Redirected:  # not run: httpx follows what the SDK would follow
                        self.plain = plain = None
                if plain is None:
                    found = await self._post(http, body, headers, request_id, progress, resume)
                if found is None:  # the stream ended before the answer
                    found = await self._resumed(http, transport, request_id, progress, resume)
                return found
        except TimeoutError:
            await self._cancelled(session, request_id, modern, "timed out")
            raise MCPError(
                code=types.REQUEST_TIMEOUT, message=f"Timed out after {timeout} seconds"
            ) from None
        except anyio.get_cancelled_exc_class():
            await self._cancelled(session, request_id, modern, "cancelled by the client")
            raise
        except (httpx2.TransportError, WireError) as exc:
            raise MCPError(code=types.CONNECTION_CLOSED, message=f"HTTP: {exc}") from None

    async def _post_plain(
        self,
        plain: PlainHTTP,
        body: bytes,
        headers: dict[str, str],
        request_id: str,
        progress: ProgressFn | None,
        resume: _Resume,
    ) -> dict[str, Any] | None:
        async with plain.post(body, headers) as answer:
            status = answer.status
            kind = answer.headers.get("content-type", "").lower()
            if 300 <= status < 400:
                await answer.body(self.max_event_size)
                raise _Redirected
            if status == 202:
                raise _unanswered(status)
            if status >= 400:
                content = await answer.body(self.max_event_size)
                raise _http_error(status, kind, content, self.transport)
            if kind.startswith("application/json"):
                return _answer(json.loads(await answer.body(MAX_JSON_BYTES)), request_id)
            if kind.startswith("text/event-stream"):
                async for event in answer.events(self.max_event_size):
                    resume.saw(event)
                    if event.event != "message" or not event.data:
                        continue
                    found = await self._on_message(json.loads(event.data), request_id, progress)
                    if found is not None:
                        await self._keep_alive(answer)
                        return found
                return None
            raise MCPError(code=types.INVALID_REQUEST, message=f"Unexpected content type: {kind}")

    async def _keep_alive(self, answer: Answer) -> None:
        """A server closes a call's SSE stream right after the answer (the spec's SHOULD):
        read that end, so the connection can carry the next call. One that keeps it open
        costs :data:`DRAIN_S` once; after that its connections are simply closed."""
        if not await answer.finish(self._drain_s):
            self._drain_s = 0.0

    async def _post(
        self,
        http: httpx2.AsyncClient,
        body: bytes,
        headers: dict[str, str],
        request_id: str,
        progress: ProgressFn | None,
        resume: _Resume,
    ) -> dict[str, Any] | None:
        async with stream_within_origin(
            http, "POST", self.url, content=body, headers=headers
        ) as response:
            status = response.status_code
            kind = response.headers.get("content-type", "").lower()
            if status == 202 or 300 <= status < 400:
                raise _unanswered(status)
            if status >= 400:
                content = b""
                if kind.startswith("application/json"):
                    with suppress(httpx2.StreamError):
                        content = await response.aread()
                raise _http_error(status, kind, content, self.transport)
            if kind.startswith("application/json"):
                return _answer(json.loads(await response.aread()), request_id)
            if kind.startswith("text/event-stream"):
                return await self._events(response, request_id, progress, resume)
            raise MCPError(code=types.INVALID_REQUEST, message=f"Unexpected content type: {kind}")

    async def _events(
        self,
        response: httpx2.Response,
        request_id: str,
        progress: ProgressFn | None,
        resume: _Resume,
    ) -> dict[str, Any] | None:
        """Read the call's SSE stream to its answer: progress relayed, anything else handed
        to the SDK's session (an upstream's request to the client, a log line…); None when
        the stream ends first."""
        async for event in httpx2.EventSource(response, max_event_size=self.max_event_size):
            resume.saw(event)
            if event.event != "message" or not event.data:
                continue  # a priming event (resumability), or an unknown kind
            found = await self._on_message(json.loads(event.data), request_id, progress)
            if found is not None:
                return found
        return None

    async def _resumed(
        self,
        http: httpx2.AsyncClient,
        transport: StreamableHTTPTransport,
        request_id: str,
        progress: ProgressFn | None,
        resume: _Resume,
    ) -> dict[str, Any]:
        """The answer of a call whose stream ended first, from ``GET`` + ``Last-Event-ID``
        (see the module docstring); raises the lost connection when it cannot be resumed.

        A resumed stream that ends again is resumed again while it moves on (gives a new
        event id, as a polling server's re-primed stream does). One that ends with nothing
        new counts as a failed attempt, like a refused GET or a lost connection: the SDK's
        client would ask for ever when the server no longer knows the id."""
        failures = 0
        while resume.last_id is not None:
            delay_ms = resume.retry_ms
            await anyio.sleep(
                (DEFAULT_RECONNECTION_DELAY_MS if delay_ms is None else delay_ms) / 1e3
            )
            before = resume.last_id
            headers = transport._prepare_headers()
            headers.pop("content-type", None)  # a GET has no body
            headers[LAST_EVENT_ID] = before
            try:
                async with stream_within_origin(http, "GET", self.url, headers=headers) as response:
                    kind = response.headers.get("content-type", "").lower()
                    if response.status_code == 200 and kind.startswith("text/event-stream"):
                        found = await self._events(response, request_id, progress, resume)
                        if found is not None:
                            return found
                        if resume.last_id != before:
                            failures = 0
                            continue
                        reason = "the resumed stream ended with nothing new"
                    else:
                        reason = f"HTTP {response.status_code} ({kind or 'no content type'})"
            except httpx2.SSEError:
                raise  # the stream itself is broken: no point asking again
            except httpx2.TransportError as exc:
                reason = str(exc) or type(exc).__name__
            failures += 1
            log.debug("resuming an upstream call's stream failed: %s", reason)
            if failures >= MAX_RECONNECTION_ATTEMPTS:
                raise MCPError(
                    code=types.CONNECTION_CLOSED,
                    message="the upstream's stream ended without an answer and could not be "
                    f"resumed ({reason})",
                )
        raise _no_answer()

    async def _on_message(
        self, message: Any, request_id: str, progress: ProgressFn | None
    ) -> dict[str, Any] | None:
        """The call's result if ``message`` is its answer; else relay it (None)."""
        if not isinstance(message, dict):
            return None
        if message.get("id") == request_id and "method" not in message:
            return _answer(message, request_id)
        if message.get("method") == "notifications/progress":
            note = message.get("params") or {}
            if note.get("progressToken") == request_id:
                if progress is not None:
                    await progress(note.get("progress", 0), note.get("total"), note.get("message"))
                return None
        await self._to_session(message)
        return None

    async def _to_session(self, message: dict[str, Any]) -> None:
        inbox = self.inbox
        if inbox is None:
            return
        try:
            parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValueError as exc:
            log.debug("an unreadable message on an upstream call's stream: %s", exc)
            return
        await inbox.send(SessionMessage(parsed))

    async def _cancelled(self, session: Any, request_id: str, modern: bool, reason: str) -> None:
        """At 2025-11-25 the upstream hears of a cancel by notification (at 2026-07-28 the
        closed stream says it)."""
        if modern:
            return
        note = types.CancelledNotification(
            params=types.CancelledNotificationParams(request_id=request_id, reason=reason)
        )
        with anyio.move_on_after(CANCEL_NOTE_S, shield=True):
            try:
                await session.send_notification(note)
            except Exception as exc:
                log.debug("could not tell the upstream a call was cancelled: %s", exc)


def _answer(message: Any, request_id: str) -> dict[str, Any]:
    """The ``result`` of a JSON-RPC answer, or its error raised as :class:`MCPError`."""
    if not isinstance(message, dict) or message.get("id") != request_id:
        raise MCPError(code=types.PARSE_ERROR, message="the upstream's answer is not for this call")
    error = message.get("error")
    if isinstance(error, dict):
        raise MCPError.from_error_data(types.ErrorData.model_validate(error))
    result = message.get("result")
    if not isinstance(result, dict):
        raise MCPError(code=types.PARSE_ERROR, message="the upstream's answer has no result")
    return result


class _Redirected(Exception):
    """A redirect answered the POST: the call did not run."""


class _Resume:
    """Where a call's SSE stream stands: the last event id it gave, the retry it asked for."""

    __slots__ = ("last_id", "retry_ms")

    def __init__(self) -> None:
        self.last_id: str | None = None
        self.retry_ms: int | None = None

    def saw(self, event: Event | httpx2.ServerSentEvent) -> None:
        if event.id:
            # an id that cannot be sent back in a header (non-ASCII, control characters)
            # leaves nothing to resume from: the stream's end is then a lost connection
            usable = event.id.isascii() and event.id.isprintable()
            self.last_id = event.id if usable else None
        if event.retry is not None:
            self.retry_ms = event.retry


def _unanswered(status: int) -> MCPError:
    return MCPError(
        code=types.INVALID_REQUEST, message=f"the upstream answered a tools/call with HTTP {status}"
    )


def _no_answer() -> MCPError:
    return MCPError(
        code=types.CONNECTION_CLOSED, message="the upstream's stream ended without an answer"
    )


def _http_error(
    status: int, kind: str, content: bytes, transport: StreamableHTTPTransport | None
) -> MCPError:
    """The JSON-RPC error in a non-2xx answer, or the SDK's stand-in for its status."""
    if kind.startswith("application/json") and content:
        try:
            error = json.loads(content).get("error")
            if isinstance(error, dict):
                return MCPError.from_error_data(types.ErrorData.model_validate(error))
        except (ValueError, AttributeError):
            pass
    if status == 404:
        if transport is not None and transport.session_id is None:
            return MCPError(code=types.METHOD_NOT_FOUND, message="Not Found")
        return MCPError(code=types.INVALID_REQUEST, message="Session terminated")
    return MCPError(code=types.INTERNAL_ERROR, message="Server returned an error response")
