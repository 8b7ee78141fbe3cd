"""End to end over stdio: a real client spawns `signoff mcp-proxy`, which spawns a real upstream
server; approvals come from another process (`signoff approve`) through the shared store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from signoff import Gate
from tests.integrations.mcp.conftest import ERAS, POLICY, text_of

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = Path(__file__).with_name("upstream.py")


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


def proxy_params(config: Path) -> StdioServerParameters:
    signoff = [sys.executable, "-m", "signoff"]
    args = ["mcp-proxy", "-c", str(config), "--principal", "erin", "--heartbeat", "0.2"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    return StdioServerParameters(
        command=signoff[0],
        args=[*signoff[1:], *args, "--", sys.executable, str(UPSTREAM)],
        env=env,
        cwd=str(ROOT),
    )


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args, "-c", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


async def pending_id(gate: Gate, exclude: set[str] | None = None) -> str:
    """The id of the first pending request not in ``exclude``, as soon as it is stored."""
    with anyio.fail_after(20):
        while True:
            found = [r for r in await gate.alist(status="pending") if r.id not in (exclude or ())]
            if found:
                return found[0].id
            await anyio.sleep(0.01)


@ERAS
async def test_stdio_proxy_allows_holds_and_runs_a_call_approved_from_the_cli(
    config: Path, gate: Gate, mode: str
) -> None:
    async def approve_from_cli() -> None:
        request_id = await pending_id(gate)
        done = await anyio.to_thread.run_sync(cli, config, "approve", request_id, "--as", "alice")
        assert done.returncode == 0, done.stderr

    async with Client(proxy_params(config), mode=mode) as client:
        echoed = await client.call_tool("echo", {"text": "over stdio"})
        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_from_cli)
            deleted = await client.call_tool("delete_file", {"path": "b.txt"})
    assert text_of(echoed) == "over stdio"
    assert not deleted.is_error and text_of(deleted) == "deleted b.txt"
    req = (await gate.alist())[0]
    assert req.calls[0].execution == "executed"
    assert req.decisions[0].channel == "cli"


async def test_stdio_client_disconnect_cancels_the_pending_request(
    config: Path, gate: Gate
) -> None:
    """A client that simply goes away (stdin closed, no cancel sent) withdraws the request."""
    await _disconnect_while_held(config, gate)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_stopping_the_proxy_cancels_its_held_requests(
    config: Path, gate: Gate, signum: int
) -> None:
    params = proxy_params(config)
    process = await anyio.open_process(
        [params.command, *params.args], cwd=params.cwd, env=params.env, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdin is not None
        for message in _HELD_CALL:
            await process.stdin.send((json.dumps(message) + "\n").encode())
        request_id = await pending_id(gate)
        process.send_signal(signum)
        with anyio.fail_after(30):
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
    req = await gate.get(request_id)
    assert req.status == "cancelled" and req.calls[0].resolved_by == "signoff-mcp"


@pytest.mark.slow
async def test_stdio_client_disconnect_stress(config: Path, gate: Gate) -> None:
    """The disconnect may land at any point after the request is stored (it once landed
    between storing and holding, and the request stayed pending): it is withdrawn every
    time."""
    for _ in range(15):
        await _disconnect_while_held(config, gate)


async def _disconnect_while_held(config: Path, gate: Gate) -> None:
    params = proxy_params(config)
    before = {r.id for r in await gate.alist()}
    process = await anyio.open_process(
        [params.command, *params.args], cwd=params.cwd, env=params.env, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdin is not None
        for message in _HELD_CALL:
            await process.stdin.send((json.dumps(message) + "\n").encode())
        request_id = await pending_id(gate, exclude=before)
        await process.stdin.aclose()  # the client is gone: no notifications/cancelled
        with anyio.fail_after(20):
            await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
    req = await gate.get(request_id)
    assert req.status == "cancelled" and req.calls[0].resolved_by == "signoff-mcp"
    assert "disconnected" in (req.calls[0].message or "")


_HELD_CALL = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-client", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "delete_file", "arguments": {"path": "c.txt"}},
    },
]
