"""``signoff init --preset deepagents | mcp-filesystem | shell``: each writes a policy that
``signoff policy check`` passes, that names the real tools, and gates the risky ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from signoff import Gate, Policy, Rejected, ToolCall
from signoff.cli.main import Preset, app
from signoff.model import CallContext, Principal, Verdict
from signoff.store import SQLiteStore

runner = CliRunner()
PRESETS = [p.value for p in Preset]


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def write(tmp_path: Path, preset: str) -> Path:
    path = tmp_path / f"{preset}.yaml"
    code, output = invoke("init", str(path), "--preset", preset)
    assert code == 0, output
    return path


def verdict(policy: Policy, tool: str, **args: Any) -> Verdict:
    ctx = CallContext(Principal("me", frozenset({"admin"})))
    return policy.evaluate(ToolCall(tool, args), ctx)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_passes_policy_check_without_warnings(tmp_path: Path, preset: str) -> None:
    path = write(tmp_path, preset)
    code, output = invoke("policy", "check", "--config", str(path), "--json")
    assert code == 0, output
    assert json.loads(output)["warnings"] == []


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_starts_a_non_interactive_gate(tmp_path: Path, preset: str) -> None:
    gate = Gate(Policy.load(write(tmp_path, preset)), interactive=False)
    try:
        assert gate.settings.non_interactive.shell_tools or preset == "mcp-filesystem"
    finally:
        gate.close()


def test_init_refuses_to_overwrite_and_an_unknown_preset(tmp_path: Path) -> None:
    path = write(tmp_path, "shell")
    assert invoke("init", str(path), "--preset", "deepagents")[0] == 2
    assert path.read_text().startswith("# signoff policy for an agent with a shell tool")
    assert invoke("init", str(path), "--preset", "deepagents", "--force")[0] == 0
    assert path.read_text().startswith("# signoff policy for a deepagents agent")
    code, output = invoke("init", str(tmp_path / "x.yaml"), "--preset", "nope")
    assert code == 2 and "nope" in output
    assert not (tmp_path / "x.yaml").exists()


# ---------------------------------------------------------------- deepagents
READ_ONLY = {"ls", "read_file", "glob", "grep"}
RISKY = {"write_file", "edit_file", "delete", "execute", "task"}
CLI_WEB_TOOLS = {"web_search", "fetch_url", "http_request"}  # deepagents-cli's tools.py


def deepagents_tool_names() -> set[str]:
    """The tools a real ``create_deep_agent`` gives its model (deepagents' own defaults)."""
    deepagents = pytest.importorskip("deepagents")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class Model(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    agent = deepagents.create_deep_agent(model=Model(messages=iter([])))
    return set(agent.nodes["tools"].bound.tools_by_name)


def test_the_deepagents_preset_names_every_tool_of_a_real_deep_agent(tmp_path: Path) -> None:
    policy = Policy.load(write(tmp_path, "deepagents"))
    names = deepagents_tool_names()
    assert names == READ_ONLY | RISKY  # a new deepagents tool shows up here first
    for name in names | CLI_WEB_TOOLS:
        assert verdict(policy, name).rule != "defaults.unknown_tool", name


@pytest.mark.parametrize("tool", sorted(READ_ONLY | {"write_todos"}))
def test_the_deepagents_preset_allows_read_only_tools(tmp_path: Path, tool: str) -> None:
    assert verdict(Policy.load(write(tmp_path, "deepagents")), tool, path="/").allowed


@pytest.mark.parametrize("tool", sorted(RISKY | CLI_WEB_TOOLS))
def test_the_deepagents_preset_asks_a_human_for_risky_tools(tmp_path: Path, tool: str) -> None:
    assert verdict(Policy.load(write(tmp_path, "deepagents")), tool).needs_approval


def test_the_deepagents_preset_lets_read_only_commands_through_non_interactive_runs(
    tmp_path: Path,
) -> None:
    gate = Gate(
        Policy.load(write(tmp_path, "deepagents")),
        SQLiteStore(tmp_path / "s.db"),
        interactive=False,
    )
    try:
        ran: list[str] = []

        @gate.guard
        def execute(command: str) -> str:
            ran.append(command)
            return "ok"

        @gate.guard
        def write_file(file_path: str, content: str) -> str:
            ran.append(file_path)
            return "ok"

        assert execute(command="git status && ls -la | head -5") == "ok"
        with pytest.raises(Rejected, match="does not start with an allowed command"):
            execute(command="pip install requests")
        with pytest.raises(Rejected, match="no human is available"):
            write_file(file_path="a.py", content="")
        assert ran == ["git status && ls -la | head -5"]
    finally:
        gate.close()


# ---------------------------------------------------------------- mcp-filesystem
# The tools @modelcontextprotocol/server-filesystem registers (src/filesystem/index.ts of
# modelcontextprotocol/servers); read_file is its deprecated alias of read_text_file.
FS_READ_ONLY = {
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
}
FS_WRITES = {"write_file", "edit_file", "create_directory", "move_file"}


@pytest.mark.parametrize("tool", sorted(FS_READ_ONLY))
def test_the_mcp_filesystem_preset_allows_reading(tmp_path: Path, tool: str) -> None:
    assert verdict(Policy.load(write(tmp_path, "mcp-filesystem")), tool, path="/p").allowed


@pytest.mark.parametrize("tool", sorted(FS_WRITES))
def test_the_mcp_filesystem_preset_asks_before_changing_files(tmp_path: Path, tool: str) -> None:
    assert verdict(Policy.load(write(tmp_path, "mcp-filesystem")), tool, path="/p").needs_approval


def test_the_mcp_filesystem_preset_allows_a_dry_run_edit_only(tmp_path: Path) -> None:
    policy = Policy.load(write(tmp_path, "mcp-filesystem"))
    assert verdict(policy, "edit_file", path="/p", edits=[], dryRun=True).allowed
    assert verdict(policy, "edit_file", path="/p", edits=[], dryRun=False).needs_approval
    assert verdict(policy, "edit_file", path="/p", edits=[], dryRun="true").needs_approval


def test_the_mcp_filesystem_preset_asks_about_tools_it_does_not_know(tmp_path: Path) -> None:
    policy = Policy.load(write(tmp_path, "mcp-filesystem"))
    assert verdict(policy, "delete_everything").rule == "defaults.unknown_tool"


# ---------------------------------------------------------------- shell
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -la", "allow"),
        ("grep -r TODO src", "allow"),
        ("ls; rm -rf ~", "require_approval"),
        ("cat $HOME/.ssh/id_rsa", "require_approval"),
        ("rm -rf build", "require_approval"),
        ("sudo rm -rf /", "deny"),
        ("ls && sudo reboot", "deny"),
    ],
)
def test_the_shell_preset_decides_commands(tmp_path: Path, command: str, expected: str) -> None:
    v = verdict(Policy.load(write(tmp_path, "shell")), "execute", command=command)
    assert v.kind == expected, (command, v.rule)
