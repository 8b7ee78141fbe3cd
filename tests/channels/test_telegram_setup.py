"""``signoff channels setup telegram``: setWebhook with the secret token, one /start link per
person, and clear errors for what would not work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.channels.telegram import link_code
from signoff.cli import app
from tests.channels.conftest import TELEGRAM_SECRET, TELEGRAM_TOKEN
from tests.channels.receiver import Receiver, answer

runner = CliRunner()


def write(tmp_path: Path, receiver: Receiver, serve: str = "") -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(
        "version: 1\n"
        "people:\n  alice: {roles: [finance], telegram: 5001}\n  bob: {roles: [finance]}\n"
        "channels:\n"
        '  telegram: {bot_token: "${T_TELEGRAM_TOKEN}", webhook_secret: "${T_TELEGRAM_SECRET}",\n'
        f'             api_url: "{receiver.url}/telegram"}}\n' + serve
    )
    return path


def test_setup_sets_the_webhook_with_the_secret_and_prints_links(
    tmp_path: Path, receiver: Receiver, secrets: dict[str, str]
) -> None:
    config = write(tmp_path, receiver)
    result = runner.invoke(
        app,
        [
            "channels",
            "setup",
            "telegram",
            "--url",
            "https://signoff.example/",
            "-c",
            str(config),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    [call] = receiver.under(f"/telegram/bot{TELEGRAM_TOKEN}/setWebhook")
    assert call.json() == {
        "url": "https://signoff.example/hooks/telegram",
        "secret_token": TELEGRAM_SECRET,
        "allowed_updates": ["message", "callback_query"],
    }
    shown = json.loads(result.output)
    assert shown["links"] == {
        p: f"https://t.me/signoff_bot?start={link_code(TELEGRAM_SECRET, p)}"
        for p in ("alice", "bob")
    }


def test_setup_uses_serve_public_url_by_default(
    tmp_path: Path, receiver: Receiver, secrets: dict[str, str]
) -> None:
    config = write(tmp_path, receiver, "serve: {public_url: https://approvals.example}\n")
    result = runner.invoke(app, ["channels", "setup", "telegram", "-c", str(config)])
    assert result.exit_code == 0, result.output
    [call] = receiver.under(f"/telegram/bot{TELEGRAM_TOKEN}/setWebhook")
    assert call.json()["url"] == "https://approvals.example/hooks/telegram"
    assert "alice: https://t.me/signoff_bot?start=" in result.output


@pytest.mark.parametrize(
    ("secret", "url", "expected"),
    [
        ("has spaces in it", "https://x.example", "webhook_secret"),
        (TELEGRAM_SECRET, None, "--url"),
    ],
)
def test_setup_refuses_what_telegram_would_refuse(
    tmp_path: Path,
    receiver: Receiver,
    secrets: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    secret: str,
    url: str | None,
    expected: str,
) -> None:
    monkeypatch.setenv("T_TELEGRAM_SECRET", secret)
    args = ["channels", "setup", "telegram", "-c", str(write(tmp_path, receiver))]
    result = runner.invoke(app, args + (["--url", url] if url else []))
    assert result.exit_code == 2 and expected in result.output
    assert receiver.under("/telegram") == []


def test_setup_reports_telegrams_refusal(
    tmp_path: Path, receiver: Receiver, secrets: dict[str, str]
) -> None:
    refusal = {"ok": False, "error_code": 401, "description": "Unauthorized"}
    receiver.script(f"/telegram/bot{TELEGRAM_TOKEN}/setWebhook", answer(401, refusal))
    config = write(tmp_path, receiver)
    result = runner.invoke(
        app, ["channels", "setup", "telegram", "--url", "https://x.example", "-c", str(config)]
    )
    assert result.exit_code == 1 and "HTTP 401" in result.output
