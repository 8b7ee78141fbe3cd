"""The reference server, `@modelcontextprotocol/server-everything` (TypeScript SDK), direct
vs through the proxy on both protocol versions: what the client sees must be the same.

The package is fetched once with npm at a pinned version into `.cache/` (git-ignored); node
and npm come from Debian (`scripts/setup-system.sh`). Without them, or when the registry is
unreachable, the tests are skipped with one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.integrations.mcp.conftest import ERAS

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"
ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".cache" / "npm" / f"server-everything-{VERSION}"
ENTRY = CACHE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def everything() -> StdioServerParameters:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node/npm not installed (scripts/setup-system.sh installs them)")
    if not ENTRY.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(CACHE),
                f"{PACKAGE}@{VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0 or not ENTRY.exists():
            pytest.skip(f"npm registry unreachable: {PACKAGE}@{VERSION} not fetched")
    return StdioServerParameters(command=node, args=[str(ENTRY), "stdio"])


@pytest.fixture
def proxy_of(tmp_path: Path) -> Any:
    """``signoff mcp-proxy`` as a real stdio process in front of ``upstream``."""
    config = tmp_path / "signoff.yaml"
    config.write_text(
        "version: 1\nstore: sqlite:///signoff.db\ndefaults:\n  unknown_tool: allow\n",
        encoding="utf-8",
    )

    def make(upstream: StdioServerParameters) -> StdioServerParameters:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
        args = ["-m", "signoff", "mcp-proxy", "-c", str(config), "--principal", "me", "--"]
        return StdioServerParameters(
            command=sys.executable, args=[*args, upstream.command, *upstream.args], env=env
        )

    return make


def _dump(items: list[Any]) -> list[dict[str, Any]]:
    return [i.model_dump(by_alias=True, mode="json", exclude_none=True) for i in items]


async def _all_resources(client: Client) -> list[Any]:
    out: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.session.list_resources(
            params=types.PaginatedRequestParams(cursor=cursor)
        )
        out.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return out


async def _what_a_client_sees(client: Client) -> dict[str, Any]:
    tools = (await client.list_tools()).tools
    resources = await _all_resources(client)
    prompts = (await client.list_prompts()).prompts
    echoed = await client.call_tool("echo", {"message": "through"})
    added = await client.call_tool("get-sum", {"a": 2, "b": 3})
    first = str(resources[0].uri)
    read = await client.read_resource(first)
    prompt = await client.get_prompt(prompts[0].name, {})
    return {
        "tools": _dump(tools),
        "resources": _dump(resources),
        "prompts": _dump(prompts),
        "echo": _dump(echoed.content),
        "sum": _dump(added.content),
        "read": _dump(read.contents),
        "prompt": _dump(prompt.messages),
    }


@ERAS
async def test_server_everything_direct_and_proxied_look_the_same(
    everything: StdioServerParameters, proxy_of: Any, mode: str
) -> None:
    async with Client(everything, mode=mode) as direct:
        want = await _what_a_client_sees(direct)
    async with Client(proxy_of(everything), mode=mode) as client:
        got = await _what_a_client_sees(client)
        modern = client.protocol_version != "2025-11-25"
    assert want["tools"] and want["resources"] and want["prompts"]
    if modern:
        # server-everything speaks 2025-11-25 only, so a direct client does too, while the
        # proxy serves 2026-07-28: its Tool has no `execution` (tasks are an extension there).
        for tool in want["tools"]:
            tool.pop("execution", None)
    for key in want:
        assert got[key] == want[key], key
