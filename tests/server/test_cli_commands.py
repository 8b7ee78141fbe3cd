"""``signoff serve``, ``signoff token …``, ``signoff link`` and the two demos."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from signoff.cli import app
from tests.server.conftest import POLICY

runner = CliRunner()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY) + "store: sqlite:///signoff.db\n")
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_token_create_list_revoke(config: Path) -> None:
    code, out = invoke(
        "token", "create", "--agent", "billing-bot", "--json", "--config", str(config)
    )
    assert code == 0, out
    created = json.loads(out)
    assert created["token"].startswith("so_agent_") and created["id"].startswith("tok_")
    code, out = invoke("token", "list", "--json", "--config", str(config))
    listed = json.loads(out)
    assert [t["subject"] for t in listed] == ["billing-bot"]
    assert created["token"] not in out  # never shown again
    code, out = invoke("token", "revoke", created["id"], "--config", str(config))
    assert code == 0 and "revoked" in out
    listed = json.loads(invoke("token", "list", "--json", "--config", str(config))[1])
    assert listed[0]["revoked_at"]
    assert invoke("token", "revoke", created["id"], "--config", str(config))[0] == 1


def test_token_create_checks_its_arguments(config: Path) -> None:
    assert invoke("token", "create", "--config", str(config))[0] == 2
    code, out = invoke("token", "create", "--approver", "mallory", "--config", str(config))
    assert code == 2 and "people" in out
    code, out = invoke(
        "token", "create", "--approver", "alice", "--trusted-roles", "--config", str(config)
    )
    assert code == 2


def test_tokens_need_a_persistent_store(tmp_path: Path) -> None:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY) + "store: memory://\n")
    code, out = invoke("token", "create", "--agent", "x", "--config", str(path))
    assert code == 2 and "persistent" in out


def test_link_prints_a_sign_in_link(config: Path) -> None:
    code, out = invoke("link", "--approver", "bob", "--config", str(config))
    assert code == 0 and "/login/link?t=" in out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(config: Path) -> tuple[subprocess.Popen[str], str]:
    """`signoff serve` in its own process, once it answers /healthz; (process, base URL)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "signoff", "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # waiting for a child process to start listening
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(proc.communicate()[0])
        time.sleep(0.1)


@pytest.mark.slow
def test_serve_answers_and_shuts_down_gracefully_with_a_long_poll_open(config: Path) -> None:
    _, out = invoke("token", "create", "--agent", "bot", "--json", "--config", str(config))
    token = json.loads(out)["token"]
    proc, url = start_serve(config)
    try:
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})
        body = {
            "tool_calls": [
                {"id": "c1", "name": "transfer_funds", "args": {"amount": 50_000, "to": "X"}}
            ],
            "context": {"principal": {"id": "frank"}},
        }
        rid = client.post("/v1/requests", json=body).json()["id"]
        with httpx.Client(base_url=url, headers=client.headers, timeout=60) as poller:
            import threading

            answers: list[int] = []
            thread = threading.Thread(
                target=lambda: answers.append(
                    poller.get(f"/v1/requests/{rid}/wait?timeout=60").status_code
                )
            )
            thread.start()
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            # uvicorn re-raises the signal after its graceful shutdown: -SIGTERM, not a crash
            assert proc.wait(timeout=20) in (0, -signal.SIGTERM)
            thread.join(10)
        assert answers == [200]  # answered with the current state, not cut off
    finally:
        if proc.poll() is None:
            proc.kill()
    output = proc.stdout.read() if proc.stdout else ""
    assert "Application shutdown complete" in output, output


@pytest.mark.slow
def test_terminal_demo_is_still_available(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "signoff", "demo", "--terminal", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rm -rf dist" in result.stdout and "(web)" not in result.stdout


@pytest.mark.slow
def test_web_demo_finishes_on_its_own_without_a_terminal(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "demo",
            "--dir",
            str(tmp_path),
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "/inbox" in out and "/login/link?t=" in out
    assert "decides in the API: edit" in out and '"amount": 25' in out
    assert "not today" in out and "rm -rf dist" in out


@pytest.mark.slow
def test_a_token_revoked_by_the_cli_stops_working_on_a_running_server(config: Path) -> None:
    """The server caches active tokens; `signoff token revoke` in another process must still
    reach it (docs/server.md: within half a second). Polled, not timed."""
    _, out = invoke("token", "create", "--agent", "bot", "--json", "--config", str(config))
    created = json.loads(out)
    proc, url = start_serve(config)
    try:
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {created['token']}"}
        ) as c:
            assert c.get("/v1/me").status_code == 200
            assert c.get("/v1/me").status_code == 200  # now answered from the cache
            assert invoke("token", "revoke", created["id"], "--config", str(config))[0] == 0
            hang_guard = time.monotonic() + 30  # not a bound: that is in test_token_cache.py
            while (answer := c.get("/v1/me")).status_code == 200:
                assert time.monotonic() < hang_guard
            assert answer.status_code == 401, answer.text
            assert "revoked" in answer.text
    finally:
        proc.kill()
        proc.wait()
