"""Channel fixtures: a loopback provider receiver, real keys and secrets, a gate wired to them.

Every provider API the channels call is the local :class:`Receiver`; every inbound callback
is signed here the way the provider signs it (HMAC with the configured secret, Ed25519 with
a freshly generated key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from signoff import Gate, Policy
from signoff.channels import Inbound
from signoff.model import ApprovalRequest, ToolCall
from signoff.store import MemoryStore, Store
from tests.channels.receiver import Receiver

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
LINE_SECRET = "line-channel-secret"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
TELEGRAM_TOKEN = "123456:telegram-bot-token"
TELEGRAM_SECRET = "telegram-webhook-secret_1"
FEISHU_VERIFICATION_TOKEN = "feishu-verification-token"
FEISHU_ENCRYPT_KEY = "feishu-encrypt-key"
DINGTALK_SECRET = "dingtalk-app-secret"

PEOPLE = """
people:
  alice: {roles: [finance], slack: UALICE, discord: "1001", email: alice@example.com, line: Ualice,
          telegram: 5001, feishu: ou_alice, dingtalk: "0501"}
  bob:   {roles: [finance], slack: UBOB, discord: "1002", email: bob@example.com, line: Ubob,
          telegram: 5002, feishu: ou_bob, dingtalk: "0502"}
  dave:  {roles: [ops], slack: UDAVE, discord: "1004", email: dave@example.com, line: Udave,
          telegram: 5004, feishu: ou_dave, dingtalk: "0504"}
  erin:  {roles: [], slack: UERIN, discord: "1005", email: erin@example.com, line: Uerin,
          telegram: 5005, feishu: ou_erin, dingtalk: "0505"}
"""

TOOLS = """
tools:
  transfer_funds:
    default: require_approval
    approvers: {roles: [finance]}
    timeout: 10m
  deploy:
    default: require_approval
    approvers: {roles: [ops]}
    notify: [slack]
"""

CHANNELS = """
channels:
  slack: {bot_token: "${T_SLACK_TOKEN}", signing_secret: "${T_SLACK_SECRET}",
          api_url: "{url}/slack/api"}
  discord: {bot_token: "${T_DISCORD_TOKEN}", application_id: "42", public_key: "{pk}",
            api_url: "{url}/discord/api/v10"}
  line: {channel_access_token: "${T_LINE_TOKEN}", channel_secret: "${T_LINE_SECRET}",
         api_url: "{url}/line"}
  webhooks:
    - {url: "{url}/hook", secret: "${T_WEBHOOK_SECRET}"}
  teams: {workflow_url: "${T_TEAMS_URL}"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2, timeout: 5}
"""


def policy_text(url: str, pk: str, *, channels: str = CHANNELS, extra: str = "") -> str:
    body = channels.replace("{url}", url).replace("{pk}", pk)
    return textwrap.dedent(f"version: 1\n{PEOPLE}{TOOLS}{body}{extra}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    yield rec
    rec.close()


@pytest.fixture
def discord_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public_hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, receiver: Receiver) -> dict[str, str]:
    values = {
        "T_SLACK_TOKEN": "xoxb-test-token",
        "T_SLACK_SECRET": SLACK_SECRET,
        "T_DISCORD_TOKEN": "discord-bot-token",
        "T_LINE_TOKEN": "line-access-token",
        "T_LINE_SECRET": LINE_SECRET,
        "T_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "T_TEAMS_URL": f"{receiver.url}/teams/workflows/run?sig=s3cr3t",
        "T_TELEGRAM_TOKEN": TELEGRAM_TOKEN,
        "T_TELEGRAM_SECRET": TELEGRAM_SECRET,
        "T_FEISHU_SECRET": "feishu-app-secret",
        "T_FEISHU_VERIFY": FEISHU_VERIFICATION_TOKEN,
        "T_FEISHU_ENCRYPT": FEISHU_ENCRYPT_KEY,
        "T_DINGTALK_SECRET": DINGTALK_SECRET,
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values


@pytest.fixture
def policy(receiver: Receiver, discord_key: Ed25519PrivateKey, secrets: dict[str, str]) -> Policy:
    return Policy.from_yaml(policy_text(receiver.url, public_hex(discord_key)))


@pytest.fixture
async def gate(policy: Policy) -> AsyncIterator[Gate]:
    g = Gate(policy, MemoryStore())
    await g.astart()
    yield g
    await g.aclose()


async def submit(
    gate: Gate,
    tool: str = "transfer_funds",
    *,
    principal: str = "erin",
    thread: str | None = None,
    args: dict[str, Any] | None = None,
) -> ApprovalRequest:
    ctx = gate.make_context(principal, thread=thread or f"t-{uuid.uuid4().hex[:8]}", agent="bot")
    call = ToolCall(tool, args if args is not None else {"amount": 50_000, "to": "ACME"})
    sub = await gate.asubmit([call], ctx)
    assert sub.request is not None
    return sub.request


async def state(store: Store, request_id: str) -> ApprovalRequest:
    found = await store.get_request(request_id)
    assert found is not None
    return found


# ---------------------------------------------------------------- provider-side signing
def slack_callback(
    payload: dict[str, Any], *, secret: str = SLACK_SECRET, ts: float | None = None
) -> Inbound:
    """A Slack interactivity POST as Slack sends it: form-encoded ``payload``, v0 HMAC."""
    now = time.time()
    stamp = str(int(ts if ts is not None else now))
    body = urlencode({"payload": json.dumps(payload)}).encode()
    sig = (
        "v0="
        + hmac.new(
            secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256
        ).hexdigest()
    )
    headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": sig}
    return Inbound(headers, body, now)


def slack_click(
    request_id: str, user: str, action: str, *, response_url: str, action_ts: str | None = None
) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user},
        "container": {"type": "message", "message_ts": "1712345678.000100", "channel_id": "D1"},
        "response_url": response_url,
        "trigger_id": "trig-1",
        "actions": [
            {
                "type": "button",
                "action_id": action,
                "block_id": f"signoff:{request_id}",
                "value": request_id,
                "action_ts": action_ts or f"{time.time():.6f}",
            }
        ],
    }


def discord_callback(
    key: Ed25519PrivateKey, payload: dict[str, Any], *, ts: float | None = None
) -> Inbound:
    now = time.time()
    stamp = str(int(ts if ts is not None else now))
    body = json.dumps(payload).encode()
    sig = key.sign(stamp.encode() + body).hex()
    return Inbound({"x-signature-ed25519": sig, "x-signature-timestamp": stamp}, body, now)


def discord_click(request_id: str, user: str, custom_id: str) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex,
        "type": 3,
        "application_id": "42",
        "token": "interaction-token",
        "member": {"user": {"id": user}},
        "data": {"custom_id": custom_id, "component_type": 2},
        "message": {"id": "m1"},
    }


def line_callback(events: list[dict[str, Any]], *, secret: str = LINE_SECRET) -> Inbound:
    body = json.dumps({"destination": "Ubot", "events": events}).encode()
    sig = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    return Inbound({"x-line-signature": sig}, body, time.time())


def line_postback(data: str, user: str, *, ts: float | None = None) -> dict[str, Any]:
    return {
        "type": "postback",
        "mode": "active",
        "timestamp": int((ts if ts is not None else time.time()) * 1000),
        "webhookEventId": uuid.uuid4().hex.upper()[:26],
        "deliveryContext": {"isRedelivery": False},
        "source": {"type": "user", "userId": user},
        "replyToken": "reply-" + uuid.uuid4().hex[:8],
        "postback": {"data": data},
    }


def webhook_callback(
    body: dict[str, Any],
    *,
    secret: str = WEBHOOK_SECRET,
    ts: float | None = None,
    msg_id: str | None = None,
) -> Inbound:
    from signoff.channels.webhooks import sign

    now = time.time()
    stamp = int(ts if ts is not None else now)
    raw = json.dumps(body).encode()
    mid = msg_id or f"msg_{uuid.uuid4().hex}"
    headers = {
        "webhook-id": mid,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, mid, stamp, raw),
    }
    return Inbound(headers, raw, now)
