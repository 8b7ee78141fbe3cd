"""The proxy's lean ``tools/call`` leg to a streamable-HTTP upstream (a real upstream process
on loopback, real clients): progress, the upstream's own requests to the client mid-call,
cancellation, and the plain HTTP/1.1 wire under it (keep-alive, chunked SSE, limits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from signoff import Gate
from signoff.integrations.mcp import UpstreamSpec
from signoff.integrations.mcp.wire import Event, PlainHTTP, WireError
from signoff.store import MemoryStore
from tests.integrations.mcp.conftest import ERAS, abandon_when, make_policy, proxied, text_of, until
from tests.integrations.mcp.test_http import run_http_upstream

POLLING = Path(__file__).with_name("polling_upstream.py")

UPSTREAM_ERAS = pytest.mark.parametrize(
    "upstream_mode", ["auto", "legacy"], ids=["up-2026", "up-2025"]
)


@pytest.fixture
def http_upstream() -> Iterator[str]:
    yield from run_http_upstream()


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    g = Gate(make_policy(), MemoryStore())
    yield g
    await g.aclose()


@ERAS
@UPSTREAM_ERAS
async def test_upstream_progress_reaches_the_client_in_order(
    gate: Gate, http_upstream: str, mode: str, upstream_mode: str
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    spec = UpstreamSpec("", http_upstream)
    async with proxied(gate, None, mode=mode, specs=[spec], upstream_mode=upstream_mode) as client:
        result = await client.call_tool("steps", {"count": 3}, progress_callback=progress)
    assert text_of(result) == "3 steps"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_an_http_upstream_asks_the_client_mid_call(gate: Gate, http_upstream: str) -> None:
    """Sampling and elicitation pushed by a 2025-11-25 upstream on the relayed call's own
    stream reach the real client, and its answers reach the upstream. (Pushed requests
    exist only at 2025-11-25, on both hops; the SDK refuses them at 2026-07-28.)"""
    mode = upstream_mode = "legacy"

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="test-model",
        )

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"colour": "teal"})

    spec = UpstreamSpec("", http_upstream)
    async with proxied(
        gate,
        None,
        mode=mode,
        specs=[spec],
        upstream_mode=upstream_mode,
        elicit=elicit,
        sampling_callback=sampling,
    ) as client:
        asked = await client.call_tool("ask_llm", {"question": "meaning?"})
        chose = await client.call_tool("ask_user", {"question": "Colour?"})
    assert text_of(asked) == "forty-two"
    assert text_of(chose) == "teal"


@ERAS
@UPSTREAM_ERAS
async def test_a_cancelled_call_is_cancelled_in_the_http_upstream(
    gate: Gate, http_upstream: str, mode: str, upstream_mode: str
) -> None:
    spec = UpstreamSpec("", http_upstream)
    async with proxied(gate, None, mode=mode, specs=[spec], upstream_mode=upstream_mode) as client:

        async def upstream_saw(event: str) -> bool:
            return event in text_of(await client.call_tool("seen", {})).splitlines()

        await abandon_when(
            lambda: client.call_tool("slow", {"seconds": 30}),
            lambda: until(lambda: upstream_saw("slow started")),
        )
        await until(lambda: upstream_saw("slow cancelled"))
        after = await client.call_tool("echo", {"text": "still here"})
    assert text_of(after) == "still here"


@UPSTREAM_ERAS
async def test_an_http_upstream_past_its_timeout_is_a_tool_result_and_is_cancelled(
    gate: Gate, http_upstream: str, upstream_mode: str
) -> None:
    spec = UpstreamSpec("", http_upstream)
    async with proxied(
        gate, None, mode="legacy", specs=[spec], upstream_mode=upstream_mode, upstream_timeout_s=0.5
    ) as client:
        result = await client.call_tool("slow", {"seconds": 30})

        async def upstream_saw(event: str) -> bool:
            return event in text_of(await client.call_tool("seen", {})).splitlines()

        await until(lambda: upstream_saw("slow cancelled"))
    assert result.is_error and "did not answer within 0.5 s" in text_of(result)


# ---------------------------------------------------------------------- the wire itself
class Loopback:
    """A real TCP server on loopback that answers each request with the next canned reply."""

    def __init__(self, replies: list[bytes], *, close_after_each: bool = False) -> None:
        self.replies = replies
        self.close_after_each = close_after_each
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                writer.write(self.replies.pop(0))
                await writer.drain()
                if self.close_after_each:
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()


@pytest.fixture
def polling_upstream() -> Iterator[str]:
    yield from run_http_upstream(script=POLLING)


@pytest.fixture(params=["plain", "httpx"])
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The lean leg's two HTTP clients: its own HTTP/1.1 wire (http:// URLs) and httpx (TLS,
    proxies), which the test forces by refusing the plain one."""
    if request.param == "httpx":
        monkeypatch.setattr(PlainHTTP, "usable_for", classmethod(lambda cls, url: None))
    return str(request.param)


POLLING_POLICY = """
version: 1
tools:
  "*": {default: allow}
"""


@UPSTREAM_ERAS
async def test_a_stream_the_upstream_closes_before_the_answer_is_resumed(
    polling_upstream: str, upstream_mode: str, wire: str
) -> None:
    """An upstream that polls (closes the call's stream after its priming event, answers
    later) gets a GET with Last-Event-ID, as the SDK's own client sends: the answer arrives
    and the tool ran once. Before, the proxy called the upstream gone and restarted it."""
    gate = Gate(make_policy(POLLING_POLICY), MemoryStore())
    spec = UpstreamSpec("", polling_upstream)
    try:
        async with proxied(gate, None, specs=[spec], upstream_mode=upstream_mode) as client:
            result = await client.call_tool("closes_stream", {"text": "once"})
            ran = await client.call_tool("ran_calls", {})
            replays = await client.call_tool("replays", {})
    finally:
        await gate.aclose()
    assert not result.is_error, text_of(result)
    assert text_of(result) == "answered after the gap: once"
    assert ran.structured_content == {"result": ["once"]}
    # resumed once, not re-run (at 2026-07-28 the SDK's server keeps the stream open: no
    # priming, nothing to resume — the call is answered on its stream)
    assert replays.structured_content == {"result": 1 if upstream_mode == "legacy" else 0}


async def test_a_stream_that_cannot_be_resumed_is_a_lost_connection_not_a_rerun(
    polling_upstream: str, wire: str
) -> None:
    """The upstream forgot the stream's events: the resumed stream ends with nothing new,
    twice, and the call is reported as possibly run — never sent again."""
    gate = Gate(make_policy(POLLING_POLICY), MemoryStore())
    spec = UpstreamSpec("", polling_upstream)
    try:
        async with proxied(gate, None, specs=[spec], upstream_mode="legacy") as client:
            result = await client.call_tool("loses_stream", {"text": "lost"})
            # the proxy reconnects to the upstream it took for gone: ask once it is back
            answers: list[types.CallToolResult] = []

            async def reconnected() -> bool:
                answers.append(await client.call_tool("ran_calls", {}))
                return not answers[-1].is_error

            await until(reconnected)
            ran = answers[-1]
            replays = await client.call_tool("replays", {})
    finally:
        await gate.aclose()
    assert result.is_error
    assert "may or may not have completed" in text_of(result)
    assert ran.structured_content == {"result": ["lost"]}
    assert replays.structured_content == {"result": 2}  # two attempts, then given up


def test_an_event_id_that_cannot_be_a_header_leaves_nothing_to_resume() -> None:
    """An upstream's id goes back in ``Last-Event-ID``: one with non-ASCII or control
    characters cannot, so the stream's end is a lost connection, not an encoding error."""
    from signoff.integrations.mcp.lean import _Resume

    resume = _Resume()
    resume.saw(Event("message", "", "41", 50))
    assert (resume.last_id, resume.retry_ms) == ("41", 50)
    for bad in ("é", "a\x01b", "\u2028"):
        resume.saw(Event("message", "", "41"))
        resume.saw(Event("message", "x", bad))
        assert resume.last_id is None
    resume.saw(Event("message", "x"))  # no id: the last one stands
    assert resume.last_id is None and resume.retry_ms == 50


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


async def test_sse_events_split_across_chunks_are_read_whole() -> None:
    stream = b'event: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n: comment\r\n\r\ndata: two\n\n'
    reply = SSE_HEAD + chunked(stream[:9], stream[9:30], stream[30:])
    async with Loopback([reply]) as url:
        plain = PlainHTTP(url)
        async with plain.post(b"{}", {"content-type": "application/json"}) as answer:
            events = [event async for event in answer.events(1024)]
        await plain.aclose()
    assert events == [Event("message", '{"a":\n1}'), Event("message", "two")]


async def test_sse_ids_and_retry_are_read_for_resuming() -> None:
    """A priming event (an id, a retry, empty data) is an event; an id with NUL and a retry
    that is not a number are ignored, as the SSE spec says."""
    stream = (
        b"id: 7\nretry: 50\ndata:\n\n"  # the SDK's priming event
        b"id: 8\ndata: one\n\n"
        b"id: 9\x00\nretry: soon\ndata: two\n\n"
        b"id: 10\n\n"  # only an id: no data, still an event for its id
        b": a comment only\n\n"
    )
    async with Loopback([SSE_HEAD + chunked(stream)]) as url:
        plain = PlainHTTP(url)
        async with plain.post(b"{}", {}) as answer:
            events = [event async for event in answer.events(1024)]
        await plain.aclose()
    assert events == [
        Event("message", "", "7", 50),
        Event("message", "one", "8"),
        Event("message", "two"),
        Event("message", "", "10"),
    ]


async def test_an_sse_event_over_the_limit_is_an_error_not_a_truncation() -> None:
    reply = SSE_HEAD + chunked(b"data: " + b"x" * 5000 + b"\r\n\r\n")
    async with Loopback([reply]) as url:
        plain = PlainHTTP(url)
        with pytest.raises(WireError, match="larger than 1024 bytes"):
            async with plain.post(b"{}", {}) as answer:
                async for _ in answer.events(1024):
                    pass
        await plain.aclose()


async def test_a_connection_is_reused_and_one_the_server_closed_is_not() -> None:
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    kept = Loopback([ok, ok])
    async with kept as url:
        plain = PlainHTTP(url)
        for _ in range(2):
            async with plain.post(b"{}", {}) as answer:
                assert await answer.body(100) == b"{}"
        await plain.aclose()
    assert kept.connections == 1

    loopback = Loopback([ok, ok], close_after_each=True)
    async with loopback as url:
        plain = PlainHTTP(url)
        async with plain.post(b"{}", {}) as answer:
            assert await answer.body(100) == b"{}"
        idle = plain._idle[0]
        await until(_as_async(idle.reader.at_eof))  # the server's close has arrived
        async with plain.post(b"{}", {}) as answer:
            assert await answer.body(100) == b"{}"
        await plain.aclose()
    assert loopback.connections == 2


async def test_an_answer_left_unread_closes_its_connection() -> None:
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    loopback = Loopback([ok, ok])
    async with loopback as url:
        plain = PlainHTTP(url)
        with anyio.CancelScope() as scope:
            async with plain.post(b"{}", {}):
                scope.cancel()  # a call cancelled before its answer was read
                await anyio.sleep(1)
        assert plain._idle == []
        async with plain.post(b"{}", {}) as answer:
            assert await answer.body(100) == b"{}"
        await plain.aclose()
    assert loopback.connections == 2


def _as_async(check: Any) -> Any:
    async def predicate() -> bool:
        return bool(check())

    return predicate


async def test_an_sse_answer_read_to_its_end_leaves_the_connection_for_the_next_call() -> None:
    reply = SSE_HEAD + chunked(b'data: {"id": 1}\r\n\r\n')
    loopback = Loopback([reply, reply])
    async with loopback as url:
        plain = PlainHTTP(url)
        for _ in range(2):
            async with plain.post(b"{}", {}) as answer:
                async for _event in answer.events(1024):
                    break  # the awaited event: the caller stops reading here
                assert await answer.finish(10)
        await plain.aclose()
    assert loopback.connections == 1


async def test_an_sse_stream_left_open_after_the_answer_is_closed_not_reused() -> None:
    open_stream = SSE_HEAD + b'13\r\ndata: {"id": 1}\r\n\r\n\r\n'  # no terminating chunk
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    loopback = Loopback([open_stream, ok])
    async with loopback as url:
        plain = PlainHTTP(url)
        async with plain.post(b"{}", {}) as answer:
            assert [e async for e in _first(answer.events(1024))] == [Event("message", '{"id": 1}')]
            assert not await answer.finish(0.05)
        assert plain._idle == []
        await plain.aclose()


async def _first(events: Any) -> Any:
    async for event in events:
        yield event
        return


async def test_an_answer_saying_close_or_http_1_0_does_not_keep_its_connection() -> None:
    close = (
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\n"
        b"content-length: 2\r\n\r\n{}"
    )
    old = b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    for reply in (close, old):
        loopback = Loopback([reply])
        async with loopback as url:
            plain = PlainHTTP(url)
            async with plain.post(b"{}", {}) as answer:
                assert await answer.body(100) == b"{}"
            assert plain._idle == []
            await plain.aclose()


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",  # smuggling
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ],
    ids=["two-lengths", "bad-chunk", "not-http"],
)
async def test_a_malformed_answer_is_a_wire_error_and_the_connection_is_dropped(
    reply: bytes,
) -> None:
    loopback = Loopback([reply])
    async with loopback as url:
        plain = PlainHTTP(url)
        with pytest.raises(WireError, match="malformed"):
            async with plain.post(b"{}", {}) as answer:
                await answer.body(100)
        assert plain._idle == []
        await plain.aclose()


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    loopback = Loopback([])
    async with loopback as url:
        plain = PlainHTTP(url)
        with pytest.raises(WireError, match="line break"):
            async with plain.post(b"{}", {"mcp-session-id": "abc\r\nx-injected: 1"}):
                pass
        await plain.aclose()
    assert loopback.requests == []
