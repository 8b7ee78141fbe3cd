"""Chat, webhooks and e-mail mask secret-named arguments at any depth, using the one
top-level ``redact_keys`` list."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signoff import Gate, Policy
from signoff.store import MemoryStore
from tests.channels.conftest import policy_text, public_hex, submit
from tests.channels.receiver import Receiver
from tests.channels.smtp import PASSWORD, USER, SMTPServer, body_text

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:.*login_data.*:DeprecationWarning"),
]

REDACT = "redact_keys: ['api[_-]?key', 'pass(word)?', iban]\n"
ARGS = {
    "amount": 50_000,
    "to": "ACME",
    "api_key": "sk-LIVE-5a5a",
    "cfg": {"password": "hunter2-chat", "host": "db"},
    "payee": {"iban": "DE89370400440532013000"},
}
SECRET_VALUES = ("sk-LIVE-5a5a", "hunter2-chat", "DE89370400440532013000")


def leaks(text: str) -> list[str]:
    return [s for s in SECRET_VALUES if s in text]


async def test_every_chat_message_and_webhook_masks_secrets_at_any_depth(
    receiver: Receiver, discord_key: Ed25519PrivateKey, secrets: dict[str, str]
) -> None:
    text = policy_text(receiver.url, public_hex(discord_key), extra=REDACT)
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate, args=dict(ARGS))
        receiver.wait_for("/slack/api/chat.postMessage", 2)
        receiver.wait_for("/discord/api/v10/channels", 1)
        receiver.wait_for("/hook", 1)
        receiver.wait_for("/teams/workflows/run", 1)
        receiver.wait_for("/line", 1)
        await gate.adecide(req.id, [{"type": "reject", "message": "no"}], approver="alice")
        receiver.wait_for("/hook", 2)
    bodies = [r.body.decode("utf-8", "replace") for r in receiver.under("/")]
    assert len(bodies) >= 7
    for body in bodies:
        assert not leaks(body), body[:300]
    slack = receiver.under("/slack/api/chat.postMessage")[0].body.decode()
    assert "50000" in slack and "db" in slack and "••••••" in slack


@pytest.fixture
def smtp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SMTPServer]:
    monkeypatch.setenv("T_SMTP_PASSWORD", PASSWORD)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        server = SMTPServer(tmp_path)
    yield server
    server.stop()


async def test_an_email_masks_secrets_at_any_depth(smtp: SMTPServer) -> None:
    channels = f"""
channels:
  email: {{host: 127.0.0.1, port: {smtp.port}, username: {USER}, password: "${{T_SMTP_PASSWORD}}",
          from: "signoff <signoff@example.org>", starttls: true, ca_file: "{smtp.cert}",
          timeout: 5}}
  delivery: {{backoff: 0.05, backoff_cap: 0.2, poll: 0.2}}
"""
    policy = Policy.from_yaml(policy_text("", "", channels=channels, extra=REDACT))
    async with Gate(policy, MemoryStore()) as gate:
        await submit(gate, args=dict(ARGS))
        mails = await asyncio.to_thread(smtp.mailbox.wait, 2)
    for mail in mails:
        for part in ("plain", "html"):
            body = body_text(mail["message"], part)
            assert "50000" in body and not leaks(body)


CHAT = """
channels:
  telegram: {bot_token: "${T_TELEGRAM_TOKEN}", webhook_secret: "${T_TELEGRAM_SECRET}",
             api_url: "{url}/telegram"}
  feishu: {app_id: cli_test, app_secret: "${T_FEISHU_SECRET}",
           verification_token: "${T_FEISHU_VERIFY}", encrypt_key: "${T_FEISHU_ENCRYPT}",
           api_url: "{url}/feishu"}
  dingtalk: {app_key: dingapp, app_secret: "${T_DINGTALK_SECRET}", robot_code: r,
             card_template_id: t, callback_route_key: k, api_url: "{url}/dingtalk"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


async def test_telegram_feishu_and_dingtalk_mask_secrets_in_prompts_and_outcomes(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    text = policy_text(receiver.url, "", channels=CHAT, extra=REDACT)
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate, args=dict(ARGS))
        for path in ("/telegram", "/feishu/open-apis/im", "/dingtalk/v1.0/card"):
            receiver.wait_for(path, 2)
        await gate.adecide(req.id, [{"type": "reject", "message": "no"}], approver="alice")
        for path in ("/telegram", "/feishu/open-apis/im", "/dingtalk/v1.0/card"):
            receiver.wait_for(path, 4)  # the outcome updates too
    bodies = [r.body.decode("utf-8", "replace") for r in receiver.under("/")]
    for body in bodies:
        assert not leaks(body), body[:300]
    tg = receiver.under("/telegram")[0].body.decode()
    assert "50000" in tg and "••••••" in tg
