"""Upstream failures survived: a real upstream process that dies, hangs, exits at once or
answers too late — the client always gets a readable result or error, never a hang, never
an empty tool list, and no human is asked to approve a call that cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from signoff import Gate
from signoff.integrations.mcp import UpstreamSpec, command_upstream
from tests.integrations.mcp.conftest import ERAS, next_pending, proxied, text_of

UPSTREAM = Path(__file__).with_name("upstream.py")
ROOT = Path(__file__).resolve().parents[3]


def process_upstream() -> UpstreamSpec:
    return command_upstream([sys.executable, str(UPSTREAM)])


async def relisted(client: Any) -> list[str]:
    """The tool names once the restarted upstream answers again."""
    with anyio.fail_after(30):
        while True:
            try:
                return [t.name for t in (await client.list_tools()).tools]
            except MCPError:
                await anyio.sleep(0.05)


@ERAS
async def test_upstream_killed_mid_call_is_an_error_result_then_restarted(
    gate: Gate, mode: str
) -> None:
    async with proxied(gate, None, mode=mode, specs=[process_upstream()]) as client:
        died = await client.call_tool("crash", {})
        names = await relisted(client)
        echoed = await client.call_tool("echo", {"text": "back"})
    assert died.is_error and "stopped during the call" in text_of(died)
    assert "echo" in names
    assert text_of(echoed) == "back"


@ERAS
async def test_tools_list_while_the_upstream_is_down_is_an_error(gate: Gate, mode: str) -> None:
    specs = [process_upstream()]
    async with proxied(gate, None, mode=mode, specs=specs, upstream_restarts=0) as client:
        assert (await client.list_tools()).tools
        await client.call_tool("crash", {})
        with pytest.raises(MCPError, match="not available"):
            await client.list_tools()  # never an empty list
        refused = await client.call_tool("echo", {"text": "x"})
        not_asked = await client.call_tool("delete_file", {"path": "y"})
    assert refused.is_error and "not available" in text_of(refused)
    assert not_asked.is_error and "not available" in text_of(not_asked)
    assert await gate.alist() == []  # nobody was asked to approve it


async def test_a_held_call_whose_upstream_dies_is_cancelled_not_left_for_a_human(
    gate: Gate,
) -> None:
    results: list[Any] = []
    specs = [process_upstream()]
    async with (
        proxied(gate, None, mode="legacy", specs=specs) as client,
        anyio.create_task_group() as tg,
    ):

        async def held() -> None:
            results.append(await client.call_tool("delete_file", {"path": "x"}))

        tg.start_soon(held)
        req = await next_pending(gate)
        await client.call_tool("crash", {})
    req = await gate.get(req.id)
    assert req.status == "cancelled" and req.calls[0].resolved_by == "signoff-mcp"
    assert "stopped" in (req.calls[0].message or "")
    assert results[0].is_error


@ERAS
async def test_upstream_timeout_is_a_tool_result(gate: Gate, upstream: Any, mode: str) -> None:
    server, _ = upstream
    async with proxied(gate, server, mode=mode, upstream_timeout_s=0.2) as client:
        result = await client.call_tool("slow", {"seconds": 30})
    assert result.is_error and "did not answer within 0.2 s" in text_of(result)


def _proxy_cli(config: Path, *upstream: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "signoff",
        "mcp-proxy",
        "-c",
        str(config),
        *extra,
        "--",
        *upstream,
    ]


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n'
)


def _run_proxy(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        args, input=INITIALIZE, capture_output=True, cwd=ROOT, timeout=120, check=False
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text("version: 1\nstore: sqlite:///signoff.db\n", encoding="utf-8")
    return path


def test_an_upstream_that_exits_at_once_gives_one_clear_line(config: Path) -> None:
    done = _run_proxy(_proxy_cli(config, sys.executable, "-c", "raise SystemExit(4)"))
    errors = done.stderr.decode()
    assert done.returncode != 0
    assert "upstream could not be started or reached" in errors
    assert "raise SystemExit(4)" in errors
    assert "TaskGroup" not in errors and "Traceback" not in errors


def test_an_upstream_that_never_answers_stops_the_proxy_naming_it(config: Path) -> None:
    hang = (sys.executable, "-c", "import time; time.sleep(120)")
    done = _run_proxy(_proxy_cli(config, *hang, extra=("--upstream-connect-timeout", "1")))
    errors = done.stderr.decode()
    assert done.returncode != 0
    assert "did not complete the MCP handshake within 1 s" in errors
    assert "time.sleep(120)" in errors
