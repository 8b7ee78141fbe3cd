"""``gate.non_interactive`` behind the MCP proxy: a real mcp client ↔ proxy ↔ upstream with a
shell tool; and the proxy command's share of the precedence rule (its flag, else
``SIGNOFF_NON_INTERACTIVE``, else the file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.server import MCPServer

from signoff import Gate, Policy
from signoff.cli.mcp_commands import _gate
from signoff.store import MemoryStore
from tests.integrations.mcp.conftest import ERAS, proxied, text_of

POLICY = """version: 1
defaults:
  unknown_tool: require_approval
people:
  erin: {roles: []}
tools:
  run_command: {default: require_approval}
  write_note: {default: require_approval}
gate:
  non_interactive:
    enabled: ENABLED
    shell_tools: [run_command]
    allow_list: [ls, "git status"]
"""


def shell_upstream() -> tuple[MCPServer, list[str]]:
    server = MCPServer("shell")
    ran: list[str] = []

    @server.tool()
    def run_command(command: str) -> str:
        """Run a shell command (pretend)."""
        ran.append(command)
        return f"ran {command}"

    @server.tool()
    def write_note(text: str) -> str:
        """Write a note."""
        ran.append(f"note {text}")
        return "written"

    return server, ran


@ERAS
async def test_the_proxy_runs_allow_listed_commands_and_refuses_the_rest(mode: str) -> None:
    server, ran = shell_upstream()
    policy = Policy.from_yaml(POLICY.replace("ENABLED", "false"))
    gate = Gate(policy, MemoryStore(), interactive=False)
    async with gate, proxied(gate, server, mode=mode) as client:
        ok = await client.call_tool("run_command", {"command": "git status && ls"})
        refused = await client.call_tool("run_command", {"command": "ls; rm -rf ~"})
        note = await client.call_tool("write_note", {"text": "hi"})
    assert not ok.is_error and text_of(ok) == "ran git status && ls"
    assert refused.is_error
    assert "part 2 (`rm -rf`) does not start with an allowed command" in text_of(refused)
    assert "Allowed commands: ls, git status" in text_of(refused)
    assert note.is_error and "no human is available" in text_of(note)
    assert ran == ["git status && ls"]


@pytest.mark.parametrize(
    ("flag", "env", "enabled", "interactive"),
    [
        (False, None, "false", True),
        (False, None, "true", False),
        (False, "0", "true", True),
        (False, "1", "false", False),
        (True, "0", "false", False),
    ],
)
def test_mcp_proxy_flag_then_environment_then_file(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flag: bool,
    env: str | None,
    enabled: str,
    interactive: bool,
) -> None:
    config = tmp_path / "signoff.yaml"
    config.write_text(POLICY.replace("ENABLED", enabled) + "store: memory://\n")
    if env is None:
        monkeypatch.delenv("SIGNOFF_NON_INTERACTIVE", raising=False)
    else:
        monkeypatch.setenv("SIGNOFF_NON_INTERACTIVE", env)
    gate: Any = _gate(config, yolo=False, non_interactive=flag)
    try:
        assert gate.interactive is interactive
    finally:
        gate.close()
