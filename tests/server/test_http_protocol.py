"""The server runs uvicorn's httptools parser with our bound on the request head
(``serve.max_header_bytes``): a head still arriving past it gets a 431 and the connection
closed; a whole head over it gets the middleware's 431; a body larger than the bound, or many
requests on one keep-alive connection, is never mistaken for a long head."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from signoff.server.http_protocol import HeadLimitedHttpTools
from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server
from tests.server.test_hygiene import answer, closed_by_server, connect, head

LIMIT = 4096


@pytest.fixture
def srv() -> Iterator[Server]:
    server = start_server(MemoryStore(), serve={"max_header_bytes": LIMIT})
    yield server
    server.close()


def test_the_server_runs_on_the_head_limited_httptools_protocol(srv: Server) -> None:
    protocol = srv.thread.server.config.http_protocol_class
    assert isinstance(protocol, type) and issubclass(protocol, HeadLimitedHttpTools)
    assert protocol.max_head_bytes == LIMIT


def test_a_head_still_arriving_past_the_limit_gets_431_naming_the_setting(srv: Server) -> None:
    sock = connect(srv)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    for _ in range(LIMIT // 100 + 1):  # more than LIMIT bytes of headers, no blank line
        sock.sendall(b"X-More: " + b"a" * 90 + b"\r\n")
    status, headers, body = answer(sock, "GET")
    assert status == 431
    assert headers["connection"] == "close"
    assert json.loads(body) == {
        "error": "headers_too_large",
        "message": f"the request headers exceed {LIMIT} bytes (serve.max_header_bytes)",
    }
    assert closed_by_server(sock)


def test_a_whole_head_over_the_limit_in_one_write_gets_431(srv: Server) -> None:
    sock = connect(srv)
    sock.sendall(head("GET", "/healthz", b"X-Padding: " + b"a" * (LIMIT + 100)))
    status, _, body = answer(sock, "GET")
    assert status == 431
    assert json.loads(body)["error"] == "headers_too_large"
    assert closed_by_server(sock)


def test_a_body_larger_than_the_head_limit_is_not_a_long_head(srv: Server) -> None:
    body = json.dumps(
        {
            "tool_calls": [{"id": "c1", "name": "anything", "args": {"pad": "x" * 4 * LIMIT}}],
            "context": {"thread": "t-body"},
        }
    ).encode()
    sock = connect(srv)
    auth = f"Authorization: Bearer {srv.tokens['bot']}".encode()
    sock.sendall(head("POST", "/v1/requests", auth, length=len(body)) + body)
    status, _, _ = answer(sock)
    assert status in (200, 201)
    sock.close()


def test_heads_on_one_keep_alive_connection_are_counted_one_by_one(srv: Server) -> None:
    sock = connect(srv)
    padding = b"X-Padding: " + b"a" * (LIMIT // 4)
    for _ in range(8):  # together 2 x LIMIT of headers, each well under it
        sock.sendall(head("GET", "/healthz", padding))
        status, _, _ = answer(sock, "GET")
        assert status == 200
    sock.close()


def test_pipelined_requests_are_answered_in_order(srv: Server) -> None:
    sock = connect(srv)
    sock.sendall(head("GET", "/healthz") * 3)
    reader = sock.makefile("rb")
    statuses = []
    for _ in range(3):
        status_line = reader.readline()
        statuses.append(int(status_line.split()[1]))
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        reader.read(length)
    assert statuses == [200, 200, 200]
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
