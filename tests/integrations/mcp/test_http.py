"""`signoff mcp-proxy --transport http` as a real process on loopback, driven by real
clients: one session (thread, upstream process, grants) per client, clients that vanish or a
proxy that is stopped withdraw held requests, bearer authentication, and large results from
an HTTP upstream."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged

from signoff import Gate
from signoff.integrations.mcp import UpstreamSpec
from signoff.store import MemoryStore
from tests.integrations.mcp.conftest import ERAS, POLICY, make_policy, proxied, text_of, until

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = Path(__file__).with_name("upstream.py")
TOKEN = "s3cret-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Block until the process accepts connections on ``port`` (readiness, not timing)."""
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(
                f"the server exited: {process.stderr.read() if process.stderr else ''!r}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)  # readiness poll, not a timed assertion
    raise RuntimeError("the server never listened")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text("store: sqlite:///signoff.db\n" + POLICY, encoding="utf-8")
    return path


@pytest.fixture
async def gate(config: Path) -> AsyncIterator[Gate]:
    g = Gate.from_config(config)
    assert isinstance(g, Gate)
    yield g
    await g.aclose()


class ProxyProcess:
    def __init__(self, config: Path, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}", "T": TOKEN}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "signoff",
                "mcp-proxy",
                "-c",
                str(config),
                "--principal",
                "erin",
                "--heartbeat",
                "0.2",
                "--transport",
                "http",
                "--port",
                str(self.port),
                *flags,
                "--",
                sys.executable,
                str(UPSTREAM),
            ],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
        )
        wait_listening(self.port, self.process)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


@pytest.fixture
def proxy(config: Path) -> Iterator[ProxyProcess]:
    running = ProxyProcess(config)
    yield running
    running.stop()


async def pending(gate: Gate, count: int) -> list[Any]:
    with anyio.fail_after(30):
        while len(found := await gate.alist(status="pending")) < count:
            await anyio.sleep(0.02)
    return found


async def test_each_client_session_has_its_own_thread_and_upstream(
    proxy: ProxyProcess, gate: Gate
) -> None:
    async with Client(proxy.url, mode="legacy") as a, Client(proxy.url, mode="legacy") as b:
        pid_a = text_of(await a.call_tool("pid", {}))
        pid_b = text_of(await b.call_tool("pid", {}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.call_tool, "delete_file", {"path": "a"})
            tg.start_soon(b.call_tool, "delete_file", {"path": "b"})
            held = await pending(gate, 2)
            for req in held:
                await gate.adecide(req.id, [{"type": "reject"}], approver="alice")
    assert pid_a != pid_b
    threads = {req.thread for req in held}
    assert len(threads) == 2 and all(t.startswith("mcp-") for t in threads)


async def test_a_thread_approval_on_one_client_does_not_cover_another(
    proxy: ProxyProcess, gate: Gate
) -> None:
    async with Client(proxy.url, mode="legacy") as a, Client(proxy.url, mode="legacy") as b:
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.call_tool, "delete_file", {"path": "a1"})
            (first,) = await pending(gate, 1)
            await gate.adecide(first.id, [{"type": "approve", "scope": "thread"}], approver="alice")
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.call_tool, "delete_file", {"path": "b1"})
            (other,) = await pending(gate, 1)  # not covered: a human is asked
            await gate.adecide(other.id, [{"type": "reject"}], approver="alice")
    assert (await gate.get(first.id)).decisions[-1].grant_id is not None
    assert other.thread != first.thread  # the grant is bound to A's thread


async def test_a_killed_2025_client_withdraws_its_held_call(
    proxy: ProxyProcess, gate: Gate
) -> None:
    script = (
        "import anyio, sys\n"
        "from mcp import Client\n"
        "async def main():\n"
        "    async with Client(sys.argv[1], mode='legacy') as c:\n"
        "        await c.call_tool('delete_file', {'path': 'k'})\n"
        "anyio.run(main)\n"
    )
    client = subprocess.Popen([sys.executable, "-c", script, proxy.url], stderr=subprocess.DEVNULL)
    try:
        (req,) = await pending(gate, 1)
        client.kill()
        client.wait(30)

        async def withdrawn() -> bool:
            return (await gate.get(req.id)).status != "pending"

        await until(withdrawn, timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
    req = await gate.get(req.id)
    assert req.status == "cancelled" and req.calls[0].resolved_by == "signoff-mcp"
    assert req.calls[0].execution is None  # a later approval can never run it


async def test_sigterm_withdraws_held_requests_over_http(proxy: ProxyProcess, gate: Gate) -> None:
    async with Client(proxy.url, mode="legacy") as client, anyio.create_task_group() as tg:

        async def call() -> None:
            with contextlib.suppress(Exception):  # the proxy goes away
                await client.call_tool("delete_file", {"path": "t"})

        tg.start_soon(call)
        (req,) = await pending(gate, 1)
        proxy.process.send_signal(signal.SIGTERM)
        await anyio.to_thread.run_sync(proxy.process.wait, 60)
        tg.cancel_scope.cancel()
    req = await gate.get(req.id)
    assert req.status == "cancelled" and req.calls[0].resolved_by == "signoff-mcp"


async def test_max_sessions_refuses_more_clients_with_a_clear_error(config: Path) -> None:
    running = ProxyProcess(config, "--max-sessions", "1")
    try:
        async with Client(running.url, mode="legacy") as first:
            await first.list_tools()
            with pytest.raises(BaseException) as caught:
                async with Client(running.url, mode="legacy"):
                    pass
    finally:
        running.stop()
    assert "--max-sessions" in repr(caught.value)


async def test_auth_token_is_required_when_set(config: Path) -> None:
    running = ProxyProcess(config, "--auth-token", "${T}")
    try:
        async with httpx.AsyncClient() as http:
            refused = await http.post(
                running.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
            )
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as authed,
            Client(_transport(running.url, authed), mode="legacy") as client,
        ):
            listed = await client.list_tools()
    finally:
        running.stop()
    assert refused.status_code == 401
    assert listed.tools


def _transport(url: str, http: Any) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(url, http_client=http)


def run_http_upstream(query: str = "", *, script: Path | None = None) -> Iterator[str]:
    """The test upstream (or ``script``, run as ``script PORT``) over streamable HTTP in its
    own process; yields its URL."""
    port = free_port()
    command = [str(UPSTREAM), "--http", str(port)] if script is None else [str(script), str(port)]
    process = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp{query}"
    finally:
        process.kill()
        process.wait(30)


@pytest.fixture
def http_upstream() -> Iterator[str]:
    yield from run_http_upstream("?key=secret-in-query")


@ERAS
@pytest.mark.parametrize("upstream_mode", ["auto", "legacy"], ids=["up-2026", "up-2025"])
async def test_results_over_1_mib_from_an_http_upstream_pass(
    http_upstream: str, mode: str, upstream_mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    gate = Gate(make_policy(), MemoryStore())
    size = 3 * 1024 * 1024
    try:
        async with proxied(
            gate,
            None,
            mode=mode,
            specs=[UpstreamSpec("", http_upstream)],
            upstream_mode=upstream_mode,
        ) as client:
            result = await client.call_tool("big", {"size": size})
    finally:
        await gate.aclose()
    assert not result.is_error and len(text_of(result)) == size
    assert "secret-in-query" not in caplog.text
    assert not [r for r in caplog.records if r.name.startswith("httpx") and r.levelname == "INFO"]


async def test_an_http_proxy_answers_a_bad_token_before_any_mcp(config: Path) -> None:
    running = ProxyProcess(config, "--auth-token", "${T}")
    try:
        async with httpx.AsyncClient() as http:
            wrong = await http.post(
                running.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Authorization": "Bearer nope"},
            )
    finally:
        running.stop()
    assert wrong.status_code == 401


async def test_a_2026_client_over_http_gets_list_changed_on_its_listen_stream(
    proxy: ProxyProcess,
) -> None:
    async with (
        Client(proxy.url, mode="auto") as client,
        client.listen(tools_list_changed=True) as events,
    ):
        await client.call_tool("announce", {"text": "hello"})
        with anyio.fail_after(30):
            event = await events.__anext__()
    assert isinstance(event, ToolsListChanged)


# ---------------------------------------------------------------- request bodies over the limit
LIMIT = 4 * 1024 * 1024


def _stderr_of(running: ProxyProcess) -> str:
    running.stop()
    assert running.process.stderr is not None
    return running.process.stderr.read().decode("utf-8", "replace")


@ERAS
async def test_a_body_over_the_http_limit_gets_an_error_naming_it(
    config: Path, gate: Gate, mode: str
) -> None:
    """Refused before any session or gate work, with a JSON-RPC error the client shows (the
    SDK's own check answers plain text, which clients show as "Server returned an error
    response"); the proxy logs it and keeps serving the same session."""
    running = ProxyProcess(config)
    try:
        async with Client(running.url, mode=mode) as client:
            with pytest.raises(Exception) as caught:
                await client.call_tool("delete_file", {"path": "x" * (LIMIT + 10)})
            echoed = await client.call_tool("echo", {"text": "still here"})
    finally:
        logged = _stderr_of(running)
    message = str(caught.value)
    assert f"over this server's limit of {LIMIT} bytes" in message
    assert "nothing was run or stored" in message and "limits.max_args_bytes" in message
    assert "Server returned an error response" not in message
    assert text_of(echoed) == "still here"
    assert "refused a request body of" in logged and f"limit of {LIMIT} bytes" in logged
    assert await gate.alist() == []  # no request was stored


async def _initialized(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    opened = await http.post(url, json=hello, headers=headers)
    assert opened.status_code == 200, opened.text
    headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-06-18"
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=done, headers=headers)).status_code == 202
    return headers


async def test_a_chunked_body_over_the_limit_is_counted_and_refused(config: Path) -> None:
    """No Content-Length to judge by: the body is counted as it arrives."""
    running = ProxyProcess(config)
    head = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", '

    async def chunks() -> AsyncIterator[bytes]:
        yield head + b'"arguments": {"text": "'
        for _ in range(LIMIT // 65536 + 1):
            yield b"y" * 65536
        yield b'"}}}'

    async def small() -> AsyncIterator[bytes]:
        yield head + b'"arguments": {"text": "chunked but small"}}}'

    try:
        async with httpx.AsyncClient(timeout=60) as http:
            headers = await _initialized(http, running.url)
            big = await http.post(running.url, content=chunks(), headers=headers)
            fine = await http.post(running.url, content=small(), headers=headers)
    finally:
        logged = _stderr_of(running)
    assert big.status_code == 413
    answer = big.json()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert f"more than {LIMIT} bytes (chunked)" in answer["error"]["message"]
    assert "(chunked)" in logged
    assert fine.status_code == 200 and "chunked but small" in fine.text, fine.text


async def test_the_http_limit_follows_the_policys_max_args_bytes(tmp_path: Path) -> None:
    """A policy that allows bigger arguments raises the transport's limit with it, so the
    gate (not the transport) answers a call over the policy's own limit, naming it."""
    path = tmp_path / "signoff.yaml"
    path.write_text(
        "store: sqlite:///signoff.db\nlimits:\n  max_args_bytes: 2000000\n" + POLICY,
        encoding="utf-8",
    )
    running = ProxyProcess(path)
    try:
        async with Client(running.url, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "z" * (LIMIT + 100)})
    finally:
        running.stop()
    assert result.is_error
    assert "over limits.max_args_bytes (2000000)" in text_of(result)


def test_body_limit_for_covers_the_policys_arguments() -> None:
    from signoff.integrations.mcp.serving import body_limit_for

    assert body_limit_for(262_144) == LIMIT  # the default policy: the SDK's 4 MiB
    assert body_limit_for(2_000_000) == 3 * 2_000_000 + 65536


@pytest.mark.parametrize("per_session", [False, True])
async def test_serving_a_one_session_proxy_over_http_says_what_it_shares(
    per_session: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The Python API's ProxyOptions default serves every client in one session; over HTTP
    that means one thread (a thread-wide approval covers every client) — said at start."""
    import uvicorn

    from signoff.integrations.mcp import ProxyOptions, build_proxy, serve
    from signoff.integrations.mcp.serving import ONE_SESSION_OVER_HTTP
    from tests.integrations.mcp.upstream import make_upstream

    async def not_listening(self: Any, *args: Any) -> None:
        return None  # the check runs before uvicorn starts: no socket needed

    monkeypatch.setattr(uvicorn.Server, "serve", not_listening)
    gate = Gate(make_policy(), MemoryStore())
    proxy = build_proxy(
        gate, [UpstreamSpec("", make_upstream()[0])], ProxyOptions(per_session=per_session)
    )
    try:
        await serve(proxy, "http", port=free_port())
    finally:
        await gate.aclose()
    warned = [r for r in caplog.records if r.getMessage() == ONE_SESSION_OVER_HTTP]
    assert bool(warned) is not per_session


async def test_a_stalled_body_gets_408_and_the_proxy_keeps_serving(tmp_path: Path) -> None:
    """A client that sends its headers and part of its body, then stalls, is answered after
    the policy's ``serve.body_timeout`` (as ``signoff serve`` answers it) instead of holding
    the request open for ever; the SDK reads bodies without a deadline."""
    path = tmp_path / "signoff.yaml"
    policy = POLICY.replace(
        "  public_url: https://signoff.example/\n",
        "  public_url: https://signoff.example/\n  body_timeout: 0.3s\n",
    )
    assert "body_timeout" in policy
    path.write_text("store: sqlite:///signoff.db\n" + policy, encoding="utf-8")
    running = ProxyProcess(path)
    try:
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as sock:
            sock.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                b"Content-Length: 100\r\n\r\n"
                b'{"jsonrpc"'  # ...and nothing more
            )
            answer = b""
            while chunk := sock.recv(65536):  # until the proxy closes the connection
                answer += chunk
        async with Client(running.url, mode="legacy") as client:
            echoed = await client.call_tool("echo", {"text": "next"})
    finally:
        logged = _stderr_of(running)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    error = json.loads(body)["error"]
    assert "did not arrive within 0.3 s (serve.body_timeout)" in error["message"]
    assert "gave up on a request body" in logged
    assert text_of(echoed) == "next"
