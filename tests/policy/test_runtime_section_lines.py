"""Errors in runtime sections (checked by their owners, which see plain mappings) carry the
line of the key they name in the policy file — in the gate, `signoff serve` and
`signoff policy check` alike."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff import Gate, Policy, PolicyError
from signoff.cli import app
from signoff.policy.source import key_path

BAD = {
    "inquiries": (
        """
        judges:
          fast: {kind: python, function: "json:dumps"}
        inquiries:
          fallback:
            judge: nope
            after: 2m
        """,
        "inquiries.fallback.judge",
        7,
    ),
    "channels": (
        """
        channels:
          slack:
            bot_token: xoxb-1
            channel: "#ops"
        """,
        "channels.slack.bot_token",
        5,
    ),
    "limits": (
        """
        limits:
          max_json_depth: 8
          max_depth: -3
        """,
        "limits.max_depth",
        5,
    ),
}


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text("version: 1\nstore: memory://\n" + textwrap.dedent(body).lstrip("\n"))
    return path


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_gate_names_the_line(tmp_path: Path, name: str) -> None:
    body, key, line = BAD[name]
    with pytest.raises(PolicyError) as caught:
        Gate(Policy.load(write(tmp_path, body)))
    assert caught.value.path.endswith(key), caught.value
    assert caught.value.line == line and f"(line {line})" in str(caught.value)
    shown = (tmp_path / "signoff.yaml").read_text().splitlines()[line - 1]
    assert shown.strip().startswith(key.rsplit(".", 1)[-1] + ":")


def test_policy_check_names_the_line(tmp_path: Path) -> None:
    body, key, line = BAD["inquiries"]
    result = CliRunner().invoke(app, ["policy", "check", "--config", str(write(tmp_path, body))])
    assert result.exit_code != 0
    assert f"{key} (line {line})" in result.output


def test_a_mapping_policy_has_no_lines_and_keeps_its_error() -> None:
    data = {"version": 1, "store": "memory://", "limits": {"max_depth": -3}}
    with pytest.raises(PolicyError) as caught:
        Gate(Policy.from_mapping(data))
    assert caught.value.line is None and "limits" in caught.value.path


@pytest.mark.parametrize(
    ("dotted", "path"),
    [
        ("channels.slack.token", ("channels", "slack", "token")),
        ("channels.webhooks[0].url", ("channels", "webhooks", 0, "url")),
        ("channels.webhooks.1.url", ("channels", "webhooks", 1, "url")),
        ("", ()),
    ],
)
def test_key_paths(dotted: str, path: tuple[object, ...]) -> None:
    assert key_path(dotted) == path
