"""One ``send`` per response: :class:`CoalescingTransport` holds a write until the next one
or the end of the event loop's step, on a real socket pair and a real event loop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from signoff.server.http_protocol import CoalescingTransport


class _Sink(asyncio.Protocol):
    pass


@pytest.fixture
async def pair() -> AsyncIterator[tuple[CoalescingTransport, socket.socket]]:
    ours, peer = socket.socketpair()
    peer.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(_Sink, ours)
    yield CoalescingTransport(transport, loop), peer  # type: ignore[arg-type]
    transport.close()
    peer.close()


def _pending(peer: socket.socket) -> bytes:
    try:
        return peer.recv(65536)
    except BlockingIOError:
        return b""


async def _until(peer: socket.socket, size: int) -> bytes:
    got = b""
    while len(got) < size:
        got += _pending(peer)
        await asyncio.sleep(0)
    return got


async def test_a_head_and_the_body_written_after_it_leave_together(
    pair: tuple[CoalescingTransport, socket.socket],
) -> None:
    transport, peer = pair
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert _pending(peer) == b""  # held: nothing sent yet
    transport.write(b"{}")
    assert await _until(peer, 40) == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"


async def test_a_lone_write_leaves_at_the_end_of_the_loop_step(
    pair: tuple[CoalescingTransport, socket.socket],
) -> None:
    transport, peer = pair
    transport.write(b"event: ping\r\n\r\n")  # e.g. a stream's head, then nothing for a while
    await asyncio.sleep(0)
    assert await _until(peer, 15) == b"event: ping\r\n\r\n"


async def test_writes_keep_their_order_across_steps(
    pair: tuple[CoalescingTransport, socket.socket],
) -> None:
    transport, peer = pair
    transport.write(b"a")
    transport.write(b"b")
    transport.write(b"c")  # held again, after a+b went out
    await asyncio.sleep(0)
    transport.write(b"d")
    assert await _until(peer, 4) == b"abcd"


async def test_close_sends_what_is_held_first(
    pair: tuple[CoalescingTransport, socket.socket],
) -> None:
    transport, peer = pair
    transport.write(b"HTTP/1.1 431 \r\nconnection: close\r\n\r\n")
    transport.close()
    assert transport.is_closing()
    assert (await _until(peer, 36)).startswith(b"HTTP/1.1 431")


async def test_writelines_and_write_eof_keep_the_order(
    pair: tuple[CoalescingTransport, socket.socket],
) -> None:
    transport, peer = pair
    transport.write(b"head;")
    transport.writelines([b"a", b"b"])
    transport.write(b"tail")
    transport.write_eof()  # sends what is held first
    got = b""
    while not got.endswith(b"tail"):
        got += _pending(peer)
        await asyncio.sleep(0)
    assert got == b"head;abtail"
