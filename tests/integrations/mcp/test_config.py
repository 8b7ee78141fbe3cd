"""Command-line and configuration edges: upstream specs, the timeout tiers, flag conflicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import StdioServerParameters
from typer.testing import CliRunner

from signoff.cli.main import app
from signoff.integrations.mcp import UpstreamError, UpstreamSpec, parse_upstream
from signoff.integrations.mcp.timeouts import client_wait_s, longest_deadline, tier_warning
from signoff.integrations.mcp.upstreams import check_names
from tests.integrations.mcp.conftest import POLICY, make_policy


def test_upstream_with_a_command_is_stdio_and_inherits_the_environment() -> None:
    spec = parse_upstream("github=npx -y '@modelcontextprotocol/server-github'")
    assert spec.name == "github"
    assert isinstance(spec.target, StdioServerParameters)
    assert spec.target.command == "npx"
    assert spec.target.args == ["-y", "@modelcontextprotocol/server-github"]
    assert spec.target.env is not None and "PATH" in spec.target.env


def test_upstream_with_a_url_is_streamable_http() -> None:
    assert parse_upstream("docs=https://mcp.example/mcp") == UpstreamSpec(
        "docs", "https://mcp.example/mcp"
    )


@pytest.mark.parametrize(
    "text", ["github", "=npx server", "git hub=npx", "a__b=npx server", "x='unclosed"]
)
def test_malformed_upstreams_say_how_to_write_them(text: str) -> None:
    with pytest.raises(UpstreamError, match=r"NAME|name|command"):
        parse_upstream(text)


def test_several_upstreams_need_distinct_names() -> None:
    with pytest.raises(UpstreamError, match="distinct NAME"):
        check_names([UpstreamSpec("a", "http://x"), UpstreamSpec("a", "http://y")])


def test_longest_deadline_counts_an_escalation_twice() -> None:
    policy = make_policy(
        POLICY
        + """
  escalating:
    default: require_approval
    timeout: 2h
    on_timeout: escalate
    escalate_to: {roles: [admin]}
"""
    )
    assert longest_deadline(policy) == 4 * 3600


def test_tier_warning_when_the_client_gives_up_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "60000")
    wait = client_wait_s(None)
    assert wait == 60
    warning = tier_warning(wait, 3600)
    assert warning is not None and "raise the client's timeout" in warning
    assert tier_warning(7200, 3600) is None
    unknown = tier_warning(None, 3600)
    assert unknown is not None and "MCP_TOOL_TIMEOUT=3660000" in unknown


def _write_policy(tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text("store: memory://\n" + POLICY, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "python", "server.py"], "choose one of --yolo"),
        (["--upstream", "a=python a.py", "--", "python", "b.py"], "use either"),
        (["--upstream", "bad name=python a.py"], "must be letters"),
    ],
)
def test_conflicting_proxy_flags_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    config = _write_policy(tmp_path)
    extra = ["--yolo", "--non-interactive"] if message.startswith("choose") else []
    result = CliRunner().invoke(app, ["mcp-proxy", "-c", str(config), *extra, *args])
    assert result.exit_code == 2
    assert message in result.output
