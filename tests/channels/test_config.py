"""The ``channels:`` section: secrets only by ${ENV} reference, clear errors naming the key,
secrets read lazily (a process without them queues, the server refuses to start)."""

from __future__ import annotations

import pytest

from signoff import Gate, Policy
from signoff.channels import LogChannel
from signoff.channels.config import parse
from signoff.channels.console import ConsoleChannel
from signoff.model import PolicyError
from signoff.store import MemoryStore
from tests.channels.conftest import PEOPLE, TOOLS

SLACK = {"bot_token": "${T_SLACK_TOKEN}", "signing_secret": "${T_SLACK_SECRET}"}


def error(section: dict[str, object]) -> str:
    with pytest.raises(PolicyError) as caught:
        parse(section)
    return str(caught.value)


def test_an_inline_secret_is_refused_naming_the_key() -> None:
    message = error({"slack": {**SLACK, "bot_token": "xoxb-123-abc"}})
    assert "channels.slack.bot_token" in message
    assert "${ENV_VAR}" in message and "xoxb-123-abc" not in message


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"discord": {"webhook_url": "https://discord.com/api/webhooks/1/tok"}}, "webhook_url"),
        ({"teams": {"workflow_url": "https://prod.logic.azure.com/x?sig=abc"}}, "workflow_url"),
        ({"line": {"channel_access_token": "abc", "channel_secret": "${S}"}}, "access_token"),
        ({"webhooks": [{"url": "https://example.com", "secret": "whsec_abc"}]}, "secret"),
        (
            {"email": {"host": "h", "username": "u", "password": "pw", "from": "a@b.c"}},
            "password",
        ),
    ],
)
def test_every_secret_field_refuses_an_inline_value(section: dict[str, object], key: str) -> None:
    assert key in error(section)


def test_unknown_keys_and_bad_urls_are_named() -> None:
    assert "channels.slack.token" in error({"slack": {**SLACK, "token": "x"}})
    assert "channels.slack.api_url" in error({"slack": {**SLACK, "api_url": "slack.com"}})
    assert "channels.pager" in error({"pager": {}})


def test_discord_needs_one_complete_mode() -> None:
    assert "choose one mode" in error(
        {"discord": {"webhook_url": "${W}", "bot_token": "${T}", "application_id": 1}}
    )
    assert "application_id and public_key" in error({"discord": {"bot_token": "${T}"}})
    assert "public_key" in error(
        {"discord": {"bot_token": "${T}", "application_id": "1", "public_key": "nothex"}}
    )
    ok = parse({"discord": {"bot_token": "${T}", "application_id": 123, "public_key": "ab" * 32}})
    assert ok.discord is not None and ok.discord.application_id == "123"


def test_email_never_sends_a_password_without_tls() -> None:
    base = {"host": "smtp.example.com", "from": "signoff@example.com"}
    message = error({"email": {**base, "username": "u", "password": "${P}", "starttls": False}})
    assert "without TLS" in message
    assert "both" in error({"email": {**base, "username": "u"}})
    assert "email address" in error({"email": {**base, "from": "signoff"}})


def test_durations_and_console_shorthand() -> None:
    config = parse({"console": True, "remind_before": "10m", "delivery": {"lease": "2m"}})
    assert config.console is not None and config.remind_before == [600.0]
    assert config.delivery.lease == 120.0
    assert "duration" in error({"remind_before": ["soon"]})


def test_a_missing_variable_only_stops_sending_and_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("T_SLACK_TOKEN", raising=False)
    monkeypatch.setenv("T_SLACK_SECRET", "x")
    policy = Policy.from_yaml(f"version: 1\n{PEOPLE}{TOOLS}channels:\n  slack: {SLACK}\n")
    gate = Gate(policy, MemoryStore())  # the CLI can still decide with this config
    assert gate.delivery is not None
    assert gate.delivery.senders() == []
    assert "channels.slack.bot_token (${T_SLACK_TOKEN})" in gate.delivery.missing()["slack"]


def test_the_server_refuses_to_start_without_a_channels_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from signoff.server import create_app

    monkeypatch.delenv("T_SLACK_TOKEN", raising=False)
    monkeypatch.setenv("T_SLACK_SECRET", "x")
    policy = Policy.from_yaml(f"version: 1\n{PEOPLE}{TOOLS}channels:\n  slack: {SLACK}\n")
    with pytest.raises(PolicyError, match=r"T_SLACK_TOKEN"):
        create_app(Gate(policy, MemoryStore()))


def test_configured_and_passed_channels_combine_and_passed_ones_win() -> None:
    policy = Policy.from_yaml(f"version: 1\n{PEOPLE}{TOOLS}channels:\n  console: true\n")
    mine = ConsoleChannel()
    gate = Gate(policy, MemoryStore(), channels=[LogChannel(), mine])
    assert [c.name for c in gate.channels] == ["log", "console"]
    assert gate.channels[1] is mine
    assert gate.delivery is None


def test_the_chat_channels_example_passes_policy_check() -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "chat_channels.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "signoff", "policy", "check", "--config", str(example)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    policy = Policy.load(example)
    assert policy.people["alice"].telegram == "81234567"
    assert policy.people["chen"].dingtalk == "0123456789012345"


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"telegram": {"bot_token": "123:abc", "webhook_secret": "${S}"}}, "telegram.bot_token"),
        ({"telegram": {"bot_token": "${T}"}}, "telegram.webhook_secret"),
        (
            {
                "dingtalk": {
                    "app_key": "k",
                    "app_secret": "${S}",
                    "robot_code": "r",
                    "card_template_id": "t",
                }
            },
            "dingtalk.callback_route_key",
        ),
        (
            {
                "dingtalk": {
                    "app_key": "k",
                    "app_secret": "plain",
                    "robot_code": "r",
                    "card_template_id": "t",
                    "callback_route_key": "c",
                }
            },
            "dingtalk.app_secret",
        ),
    ],
)
def test_new_chat_channels_name_the_key_at_fault(section: dict[str, object], key: str) -> None:
    assert f"channels.{key}" in error(section)


def test_chat_addresses_in_people_are_text_and_checked() -> None:
    policy = Policy.from_yaml(
        "version: 1\npeople:\n  a: {telegram: 81234567, dingtalk: 42, feishu: ou_a}\n"
    )
    person = policy.people["a"]
    assert (person.telegram, person.dingtalk, person.feishu) == ("81234567", "42", "ou_a")
    with pytest.raises(PolicyError, match=r"feishu is a string"):
        Policy.from_yaml("version: 1\npeople:\n  a: {feishu: 12}\n")
