"""Every inbound path, the same suite: a valid callback decides; a bad signature, a stale
timestamp, a replayed event, an unknown user, a user without the role, and a decision on an
already-decided request are refused — and nothing changes.

Callbacks are signed for real (Slack HMAC, Discord Ed25519 with a generated key, LINE
HMAC, Standard Webhooks) and handed to the channel's ``receive`` as the server would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signoff import Gate
from signoff.channels import Inbound, Reply
from signoff.channels import Receiver as ChannelReceiver
from signoff.model import ApprovalRequest
from tests.channels.conftest import (
    discord_callback,
    discord_click,
    line_callback,
    line_postback,
    slack_callback,
    slack_click,
    state,
    submit,
    webhook_callback,
)
from tests.channels.receiver import Receiver

pytestmark = pytest.mark.asyncio

STALE = 400.0  # seconds: outside every 5-minute window


@dataclass
class Provider:
    """How one provider calls us, and what a refusal from us looks like to it."""

    name: str
    decision_channel: str
    ids: dict[str, str]
    rec: Receiver
    key: Ed25519PrivateKey

    def callback(
        self,
        request_id: str,
        who: str,
        action: str = "approve",
        *,
        forged: bool = False,
        age: float = 0.0,
    ) -> Inbound:
        user = self.ids.get(who, who)
        ts = time.time() - age
        if self.name == "slack":
            payload = slack_click(
                request_id, user, f"signoff:{action}", response_url=f"{self.rec.url}/slack/actions"
            )
            return slack_callback(payload, ts=ts, **({"secret": "forged"} if forged else {}))
        if self.name == "discord":
            key = Ed25519PrivateKey.generate() if forged else self.key
            return discord_callback(
                key, discord_click(request_id, user, f"signoff:{action}:{request_id}"), ts=ts
            )
        if self.name == "line":
            event = line_postback(f"a={action}&r={request_id}", user, ts=ts)
            return line_callback([event], **({"secret": "forged"} if forged else {}))
        body = {"request_id": request_id, "approver": user, "action": action}
        return webhook_callback(body, ts=ts, **({"secret": "whsec_Zm9yZ2Vk"} if forged else {}))

    def refusal(self, reply: Reply, before: int) -> str:
        """Why the callback was refused, as the provider sees it ('' if it was not)."""
        if reply.status >= 400:
            return f"HTTP {reply.status}"
        body: Any = reply.body
        if self.name == "slack":
            answers = self.rec.under("/slack/actions")[before:]
            return answers[0].json()["text"] if answers else ""
        if self.name == "discord":
            data = body.get("data") or {}
            return str(data.get("content")) if data.get("flags") == 64 else ""
        if self.name == "line":
            result = body["results"][0]
            return "" if result == "decided" else result
        return ""


PROVIDERS = {
    "slack": {"alice": "UALICE", "dave": "UDAVE", "stranger": "UNOBODY"},
    "discord": {"alice": "1001", "dave": "1004", "stranger": "9999"},
    "line": {"alice": "Ualice", "dave": "Udave", "stranger": "Unobody"},
    "webhook": {"alice": "alice", "dave": "dave", "stranger": "mallory"},
}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(
    request: pytest.FixtureRequest, receiver: Receiver, discord_key: Ed25519PrivateKey
) -> Provider:
    name = request.param
    channel = "webhook" if name == "webhook" else name
    return Provider(name, channel, PROVIDERS[name], receiver, discord_key)


def endpoint(gate: Gate, provider: Provider) -> ChannelReceiver:
    assert gate.delivery is not None
    found = gate.delivery.receiver("webhooks" if provider.name == "webhook" else provider.name)
    assert isinstance(found, ChannelReceiver)
    return found


async def call(gate: Gate, provider: Provider, inbound: Inbound) -> tuple[Reply, str]:
    before = len(provider.rec.under("/slack/actions"))
    reply = await endpoint(gate, provider).receive(inbound, gate)
    return reply, provider.refusal(reply, before)


def unchanged(before: ApprovalRequest, after: ApprovalRequest) -> None:
    assert after.status == before.status
    assert after.decisions == before.decisions
    assert after.version == before.version


# ---------------------------------------------------------------- the suite
async def test_a_valid_callback_decides(gate: Gate, provider: Provider) -> None:
    req = await submit(gate)
    reply, refused = await call(gate, provider, provider.callback(req.id, "alice"))
    assert reply.status == 200 and not refused
    after = await state(gate.store, req.id)
    assert after.status == "resolved"
    assert [(d.approver, d.type, d.channel) for d in after.decisions] == [
        ("alice", "approve", provider.decision_channel)
    ]


async def test_a_bad_signature_is_refused_and_changes_nothing(
    gate: Gate, provider: Provider
) -> None:
    req = await submit(gate)
    reply, _ = await call(gate, provider, provider.callback(req.id, "alice", forged=True))
    assert reply.status == 401
    unchanged(req, await state(gate.store, req.id))


async def test_a_stale_timestamp_is_refused_and_changes_nothing(
    gate: Gate, provider: Provider
) -> None:
    req = await submit(gate)
    _, refused = await call(gate, provider, provider.callback(req.id, "alice", age=STALE))
    assert refused
    unchanged(req, await state(gate.store, req.id))


async def test_a_replayed_event_is_refused_and_decides_nothing_more(
    gate: Gate, provider: Provider
) -> None:
    req = await submit(gate)
    inbound = provider.callback(req.id, "alice")
    first, _ = await call(gate, provider, inbound)
    decided = await state(gate.store, req.id)
    _, refused = await call(gate, provider, inbound)
    assert first.status == 200
    assert refused
    unchanged(decided, await state(gate.store, req.id))
    assert len(decided.decisions) == 1


async def test_an_unknown_user_is_refused_and_changes_nothing(
    gate: Gate, provider: Provider
) -> None:
    req = await submit(gate)
    _, refused = await call(gate, provider, provider.callback(req.id, "stranger"))
    assert refused
    unchanged(req, await state(gate.store, req.id))


async def test_a_user_without_the_role_is_refused_and_changes_nothing(
    gate: Gate, provider: Provider
) -> None:
    req = await submit(gate)
    _, refused = await call(gate, provider, provider.callback(req.id, "dave"))
    assert refused
    unchanged(req, await state(gate.store, req.id))


async def test_a_decision_on_a_decided_request_is_refused_and_changes_nothing(
    gate: Gate, provider: Provider
) -> None:
    req = await submit(gate)
    await gate.adecide(req.id, [{"type": "reject", "message": "no"}], approver="bob")
    decided = await state(gate.store, req.id)
    _, refused = await call(gate, provider, provider.callback(req.id, "alice"))
    assert refused
    unchanged(decided, await state(gate.store, req.id))
    assert decided.decisions[0].approver == "bob"
