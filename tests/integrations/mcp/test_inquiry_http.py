"""`signoff mcp inquiry-server --transport http` as a real process on loopback: a client
process killed (SIGKILL) while ``send_inquiry`` waits for a human withdraws the inquiry —
cancelled and audited — on both protocol versions, instead of leaving it pending for
someone to answer into the void."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from signoff import Gate
from signoff.integrations.mcp.inquiry import CANCELLED, CLIENT_LEFT
from signoff.store.base import AuditQuery
from tests.integrations.mcp.conftest import ERAS, until
from tests.integrations.mcp.test_http import free_port, pending, wait_listening

ROOT = Path(__file__).resolve().parents[3]

#: A client that asks and then waits: it is killed while the call is held.
ASKING_CLIENT = """\
import anyio, sys
from mcp import Client
async def main():
    async with Client(sys.argv[1], mode=sys.argv[2]) as c:
        await c.call_tool('send_inquiry', {'question': 'Deploy?', 'timeout_s': 600})
anyio.run(main)
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text("version: 1\nstore: sqlite:///signoff.db\n", encoding="utf-8")
    return path


@pytest.fixture
async def gate(config: Path) -> AsyncIterator[Gate]:
    g = Gate.from_config(config)
    assert isinstance(g, Gate)
    yield g
    await g.aclose()


@pytest.fixture
def inquiry_url(config: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    command = [sys.executable, "-m", "signoff", "inquiry-server", "-c", str(config)]
    command += ["--principal", "erin", "--heartbeat", "0.2", "--no-elicitation"]
    command += ["--transport", "http", "--port", str(port)]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE)
    try:
        wait_listening(port, server)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait(30)


@ERAS
async def test_a_killed_http_client_withdraws_its_inquiry(
    inquiry_url: str, gate: Gate, mode: str
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    client = subprocess.Popen(
        [sys.executable, "-c", ASKING_CLIENT, inquiry_url, mode],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        (req,) = await pending(gate, 1)
        client.kill()
        await anyio.to_thread.run_sync(client.wait, 30)

        async def withdrawn() -> bool:
            return (await gate.get(req.id)).status != "pending"

        await until(withdrawn, timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
    req = await gate.get(req.id)
    assert req.status == "cancelled"
    assert req.calls[0].resolved_by == "signoff-inquiry"
    # 2026-07-28: the closed request cancels the handler; 2025-11-25: the next heartbeat
    # finds the client gone.
    assert req.calls[0].message == (CANCELLED if mode == "auto" else CLIENT_LEFT)
    audit = await gate.store.read_audit(AuditQuery(request_id=req.id, actor="signoff-inquiry"))
    assert [row.event for row in audit] == ["cancelled"]
