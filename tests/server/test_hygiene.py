"""Slow, greedy and malformed clients on a real server (uvicorn on loopback, raw sockets).

A stalled or trickled body gets a 408 and a closed connection; oversized headers, idle
keep-alive connections and too many connections are bounded by ``serve:`` settings;
non-ASCII credentials and signatures are a 401/403; malformed JSON bodies are a 422 naming
the body — never a 500. ``serve.metrics_token`` protects ``/metrics``. Short timeouts are
configured so the tests are quick; no test asserts how long anything took.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.responses import Response
from starlette.routing import Route

from signoff import Gate, Policy
from signoff.model import PolicyError
from signoff.server import ServerSettings, ServerThread, create_app
from signoff.store import MemoryStore
from tests.server.conftest import Server, start_server, transfer
from tests.server.test_inbox_forms import csrf_of, sign_in

NON_ASCII = "é☃".encode()  # raw UTF-8 bytes on the wire


@pytest.fixture
def quick() -> Iterator[Server]:
    """A server with short limits (so a stalled client is cut off within a second)."""
    srv = start_server(
        MemoryStore(),
        serve={"body_timeout": 0.5, "keep_alive_timeout": 1, "max_header_bytes": 4096},
    )
    yield srv
    srv.close()


def connect(srv: Server) -> socket.socket:
    host, port = srv.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def head(method: str, path: str, *headers: bytes, length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", *headers]
    if length is not None:
        lines += [b"Content-Type: application/json", f"Content-Length: {length}".encode()]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def answer(sock: socket.socket, method: str = "POST") -> tuple[int, dict[str, str], bytes]:
    response = http.client.HTTPResponse(sock, method=method)
    response.begin()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def closed_by_server(sock: socket.socket) -> bool:
    """Reads what is left (an error response, say) until the server closes the connection;
    False when the socket stays open for its whole 30 s timeout."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


# ---------------------------------------------------------------------- slow bodies
def test_a_stalled_body_gets_408_and_the_connection_closed(quick: Server) -> None:
    sock = connect(quick)
    auth = f"Authorization: Bearer {quick.tokens['bot']}".encode()
    sock.sendall(head("POST", "/v1/requests", auth, length=1000) + b'{"tool_calls": [')
    status, headers, body = answer(sock)
    assert status == 408
    assert headers["connection"] == "close"
    assert json.loads(body) | {"message": ""} == {
        "error": "body_timeout",
        "field": "body",
        "message": "",
    }
    assert closed_by_server(sock)


def test_a_trickled_body_gets_408(quick: Server) -> None:
    sock = connect(quick)
    auth = f"Authorization: Bearer {quick.tokens['bot']}".encode()
    sock.sendall(head("POST", "/v1/requests", auth, length=100_000))
    stop = threading.Event()

    def trickle() -> None:
        while not stop.is_set():
            try:
                sock.send(b" ")
            except OSError:
                return
            stop.wait(0.05)

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        status, _, body = answer(sock)
    finally:
        stop.set()
        sender.join(5)
    assert status == 408 and json.loads(body)["error"] == "body_timeout"


def test_a_body_that_arrives_in_pieces_in_time_is_read(quick: Server) -> None:
    body = json.dumps(
        {"tool_calls": [transfer(5)], "context": {"principal": {"id": "frank"}}}
    ).encode()
    sock = connect(quick)
    auth = f"Authorization: Bearer {quick.tokens['bot']}".encode()
    sock.sendall(head("POST", "/v1/requests", auth, length=len(body)) + body[:10])
    sock.sendall(body[10:])
    status, _, answered = answer(sock)
    assert status == 200, answered
    assert json.loads(answered)["verdicts"][0]["verdict"] == "allow"


def test_an_answer_before_the_body_closes_the_connection(quick: Server) -> None:
    sock = connect(quick)  # no credentials: 401 without reading the announced body
    sock.sendall(head("POST", "/v1/requests", length=500))
    status, headers, body = answer(sock)
    assert status == 401 and json.loads(body)["error"] == "unauthorized"
    assert headers["connection"] == "close"
    assert closed_by_server(sock)


def test_a_body_over_1_mib_is_413_in_the_json_shape(quick: Server) -> None:
    agent = quick.client("bot")
    big = b"[" + b" " * (1024 * 1024) + b"]"
    announced = agent.post("/v1/requests", content=big)
    assert announced.status_code == 413
    assert announced.json()["error"] == "body_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield big

    streamed = agent.post("/v1/requests", content=chunks())
    assert streamed.status_code == 413
    assert streamed.json() | {"message": ""} == {
        "error": "body_too_large",
        "field": "body",
        "message": "",
    }


@pytest.mark.parametrize("framing", ["announced", "chunked"])
def test_a_10_mb_body_is_read_to_its_end_so_the_client_gets_the_413(
    quick: Server, framing: str
) -> None:
    """Answering while the client still sends made its kernel see a reset: the client (a
    RemoteGate, say) reported the server unreachable instead of the 413. The server reads
    and drops the rest first, so the whole body goes out and the answer is read."""
    size = 10 * 1024 * 1024
    auth = f"Authorization: Bearer {quick.tokens['bot']}".encode()
    sock = connect(quick)
    if framing == "announced":
        sock.sendall(head("POST", "/v1/requests", auth, length=size))
        sock.sendall(b"[" + b" " * (size - 2) + b"]")  # raised ConnectionResetError before
    else:
        sock.sendall(
            head("POST", "/v1/requests", auth, b"Content-Type: application/json")[:-2]
            + b"Transfer-Encoding: chunked\r\n\r\n"
        )
        piece = b" " * 65536
        sock.sendall(b"1\r\n[\r\n" + b"%x\r\n%s\r\n" % (len(piece), piece) * 160)
        sock.sendall(b"1\r\n]\r\n0\r\n\r\n")
    status, headers, body = answer(sock)
    assert status == 413 and json.loads(body)["error"] == "body_too_large"
    assert headers["connection"] == "close"
    assert closed_by_server(sock)


def test_event_streams_and_long_polls_are_not_cut_by_the_body_timeout(quick: Server) -> None:
    rid = quick.pending()
    agent = quick.client("bot")
    waited = agent.get(f"/v1/requests/{rid}/wait", params={"timeout": 1.5})
    assert waited.status_code == 200 and waited.json()["status"] == "pending"


# ---------------------------------------------------------------------- uvicorn's limits
def test_oversized_headers_are_refused(quick: Server) -> None:
    sock = connect(quick)
    sock.sendall(head("GET", "/healthz", b"X-Padding: " + b"a" * 8000))
    status, _, _ = answer(sock, "GET")
    assert status == 431  # whole (the middleware) or still arriving (the protocol's guard)
    assert closed_by_server(sock)


def test_a_head_that_never_ends_is_cut_off(quick: Server) -> None:
    sock = connect(quick)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    try:
        for _ in range(100):  # 100 x 100 bytes of headers, never the blank line
            sock.sendall(b"X-More: " + b"a" * 90 + b"\r\n")
    except OSError:
        pass  # the server closed the connection already
    assert closed_by_server(sock)


def test_idle_keep_alive_connections_are_closed(quick: Server) -> None:
    sock = connect(quick)
    sock.sendall(head("GET", "/healthz"))
    status, _, _ = answer(sock, "GET")
    assert status == 200
    assert closed_by_server(sock)  # keep_alive_timeout: 1


def test_connections_beyond_max_connections_get_503() -> None:
    srv = start_server(MemoryStore(), serve={"max_connections": 3})
    idle = [connect(srv) for _ in range(3)]
    try:
        for sock in idle:  # a full request each: the server has surely accepted them
            sock.sendall(head("GET", "/healthz"))
            answer(sock, "GET")
        extra = connect(srv)
        extra.sendall(head("GET", "/healthz"))
        status, _, _ = answer(extra, "GET")
        assert status == 503
        extra.close()
    finally:
        for sock in idle:
            sock.close()
        srv.close()


def test_the_server_runs_with_the_configured_limits() -> None:
    policy = Policy.from_yaml("version: 1\ntools: {}\n")
    settings = ServerSettings.from_sections(
        {"serve": {"keep_alive_timeout": "2s", "max_connections": 50, "max_header_bytes": 8192}}
    )
    config = ServerThread(create_app(Gate(policy, MemoryStore()), settings)).server.config
    assert config.timeout_keep_alive == 2
    assert config.limit_concurrency == 50
    assert config.h11_max_incomplete_event_size == 8192


def test_limit_defaults() -> None:
    serve = ServerSettings().serve
    assert (serve.body_timeout, serve.keep_alive_timeout) == (10.0, 5.0)
    assert (serve.max_connections, serve.max_header_bytes) == (1000, 32768)
    assert serve.metrics_token is None


# ---------------------------------------------------------------------- non-ASCII credentials
def raw_get(srv: Server, path: str, header: bytes) -> tuple[int, dict[str, Any]]:
    sock = connect(srv)
    sock.sendall(head("GET", path, header, b"Connection: close"))
    status, _, body = answer(sock, "GET")
    sock.close()
    return status, json.loads(body)


def test_non_ascii_authorization_and_cookies_are_401(server: Server) -> None:
    for header in (
        b"Authorization: Bearer " + NON_ASCII,
        b"Authorization: " + NON_ASCII + b" token",
        b"Cookie: signoff_session=" + NON_ASCII,
    ):
        status, body = raw_get(server, "/v1/requests", header)
        assert status == 401 and body["error"] == "unauthorized", header


def test_non_ascii_csrf_tokens_are_403(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    api = bob.post(
        f"/v1/requests/{rid}/decisions",
        json=[{"type": "approve"}],
        headers={"X-CSRF-Token": NON_ASCII},
    )
    assert api.status_code == 403 and api.json()["error"] == "csrf_failed"
    form = bob.post(
        f"/requests/{rid}/decide",
        data={"tool_call_id": "call_1", "type": "approve", "csrf": "é☃"},
        headers={"Origin": server.url},
    )
    assert form.status_code == 403
    csrf_of(bob)  # the session still works
    login = server.client()
    login.get("/login")
    signin = login.post("/login", data={"token": "x", "csrf": "é☃"}, headers={"Origin": server.url})
    assert signin.status_code == 403


CHANNELS = """
version: 1
tools: {}
channels:
  slack: {bot_token: "${T_SLACK_TOKEN}", signing_secret: "${T_SLACK_SECRET}",
          api_url: "http://127.0.0.1:9/slack"}
  discord: {bot_token: "${T_DISCORD_TOKEN}", application_id: "42",
            public_key: "PK", api_url: "http://127.0.0.1:9/discord"}
  line: {channel_access_token: "${T_LINE_TOKEN}", channel_secret: "${T_LINE_SECRET}",
         api_url: "http://127.0.0.1:9/line"}
  webhooks:
    - {url: "http://127.0.0.1:9/hook", secret: "${T_WEBHOOK_SECRET}"}
"""


def test_non_ascii_channel_signatures_are_refused_not_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "T_SLACK_TOKEN": "xoxb-t",
        "T_SLACK_SECRET": "slack-secret",
        "T_DISCORD_TOKEN": "discord-t",
        "T_LINE_TOKEN": "line-t",
        "T_LINE_SECRET": "line-secret",
        "T_WEBHOOK_SECRET": "whsec_" + "a" * 44,
    }.items():
        monkeypatch.setenv(name, value)
    policy = Policy.from_yaml(CHANNELS.replace("PK", "11" * 32))
    thread = ServerThread(create_app(Gate(policy, MemoryStore()), owns_gate=True))
    thread.start()
    now = str(int(time.time())).encode()
    forged = {
        "/hooks/slack": [
            b"X-Slack-Request-Timestamp: " + now,
            b"X-Slack-Signature: v0=" + NON_ASCII,
        ],
        "/hooks/discord": [b"X-Signature-Timestamp: " + now, b"X-Signature-Ed25519: " + NON_ASCII],
        "/hooks/line": [b"X-Line-Signature: " + NON_ASCII],
        "/hooks/webhook": [
            b"Webhook-Id: msg_1",
            b"Webhook-Timestamp: " + now,
            b"Webhook-Signature: v1," + NON_ASCII,
        ],
    }
    try:
        host, port = thread.url.removeprefix("http://").split(":")
        for path, headers in forged.items():
            sock = socket.create_connection((host, int(port)), timeout=30)
            sock.sendall(head("POST", path, *headers, b"Connection: close", length=2) + b"{}")
            status, _, body = answer(sock)
            sock.close()
            assert status == 401, (path, status, body)
    finally:
        thread.stop()


# ---------------------------------------------------------------------- malformed bodies
BAD_BODIES = {
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "huge integer": b'{"tool_calls": ' + b"9" * 5000 + b"}",
    "huge integer in args": b'{"tool_calls": [{"id": "a", "name": "get_price", "args": {"x": '
    + b"1" * 5000
    + b"}}]}",
    "not UTF-8": b"\xff\xfe{}",
    "not JSON": b"{'single': 'quotes'}",
    "a list": b"[1, 2]",
    "wrong types": b'{"tool_calls": "x", "context": 5}',
}


@pytest.mark.parametrize("kind", list(BAD_BODIES))
def test_malformed_json_bodies_are_422_naming_the_field(server: Server, kind: str) -> None:
    rid = server.pending()
    posts = {
        "bot": ["/v1/requests", "/v1/inquiries", f"/v1/requests/{rid}/cancel"],
        "bob": [f"/v1/requests/{rid}/decisions"],
    }
    for who, paths in posts.items():
        for path in paths:
            r = server.client(who).post(
                path, content=BAD_BODIES[kind], headers={"Content-Type": "application/json"}
            )
            assert r.status_code == 422, (path, r.status_code, r.text)
            assert r.json()["error"] in ("invalid", "invalid_decision")
            assert r.json()["field"]
    assert server.client("bob").get(f"/v1/requests/{rid}").json()["status"] == "pending"


def test_a_huge_number_in_an_inbox_edit_form_is_shown_as_a_field_error(server: Server) -> None:
    rid = server.pending()
    bob = sign_in(server, "bob")
    r = bob.post(
        f"/requests/{rid}/decide",
        data={
            "tool_call_id": "call_1",
            "type": "edit",
            "arg.amount": "9" * 5000,
            "csrf": csrf_of(bob),
        },
        headers={"Origin": server.url},
    )
    assert r.status_code == 422


def test_an_unexpected_error_still_answers_in_the_json_shape(server: Server) -> None:
    async def boom(request: Any) -> Response:
        raise RuntimeError("a bug")

    server.app.router.routes.append(Route("/boom", boom))
    r = server.client().get("/boom")
    assert r.status_code == 500
    assert r.json()["error"] == "internal_error" and "a bug" not in r.text


# ---------------------------------------------------------------------- /metrics token
TOKEN = "m3trics-t0ken-for-the-scraper"


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("SIGNOFF_METRICS_TOKEN", TOKEN)
    srv = start_server(MemoryStore(), serve={"metrics_token": "${SIGNOFF_METRICS_TOKEN}"})
    yield srv
    srv.close()


def test_metrics_token_is_required_when_configured(guarded: Server) -> None:
    http_ = guarded.client()
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-of-some-length"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": b"Bearer " + NON_ASCII},
        {"Authorization": f"Bearer {guarded.tokens['alice']}"},  # an API token is not it
    ):
        r = http_.get("/metrics", headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    ok = http_.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "signoff_pending_requests" in ok.text
    assert http_.get("/healthz").status_code == 200  # health checks stay open


def test_metrics_are_open_without_a_token(server: Server) -> None:
    assert server.client().get("/metrics").status_code == 200


def test_an_inline_metrics_token_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"serve\.metrics_token.*ENV_VAR"):
        ServerSettings.from_sections({"serve": {"metrics_token": TOKEN}})


def test_a_metrics_token_from_an_unset_variable_is_an_error() -> None:
    with pytest.raises(PolicyError, match="NOT_SET_ANYWHERE_42"):
        ServerSettings.from_sections({"serve": {"metrics_token": "${NOT_SET_ANYWHERE_42}"}})
