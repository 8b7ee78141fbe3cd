"""Teams (Workflows webhook + Adaptive Card, follow-up card with the outcome) and the
console channel, and ``notify:`` choosing channels per rule."""

from __future__ import annotations

import io
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels.console import ConsoleChannel
from signoff.store import MemoryStore
from tests.channels.conftest import policy_text, submit
from tests.channels.receiver import Receiver

pytestmark = pytest.mark.asyncio

TEAMS = """
serve: {public_url: "https://signoff.example"}
channels:
  teams: {workflow_url: "${T_TEAMS_URL}"}
  slack: {bot_token: "${T_SLACK_TOKEN}", signing_secret: "${T_SLACK_SECRET}",
          api_url: "{url}/slack/api"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


def card_of(body: dict[str, Any]) -> dict[str, Any]:
    [attachment] = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    content: dict[str, Any] = attachment["content"]
    return content


async def test_teams_gets_an_adaptive_card_with_an_open_button_then_the_outcome(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    text = policy_text(receiver.url, "", channels="", extra=TEAMS.replace("{url}", receiver.url))
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        [post] = receiver.wait_for("/teams/workflows/run")
        assert post.query == "sig=s3cr3t"
        assert gate.delivery is not None
        while (await gate.delivery.outbox.outbox_for(req.id))[0].status != "sent":
            await receiver_pause()
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        follow_up = receiver.wait_for("/teams/workflows/run", 2)[1]
    card = card_of(post.json())
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    assert card["actions"] == [
        {
            "type": "Action.OpenUrl",
            "title": "Review & decide",
            "url": f"https://signoff.example/requests/{req.id}",
        }
    ]
    assert "?t=" not in post.body.decode()  # a shared channel never gets a personal link
    assert "Approved by alice" in follow_up.body.decode()


async def test_notify_sends_a_rule_only_to_the_channels_it_names(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    text = policy_text(receiver.url, "", channels="", extra=TEAMS.replace("{url}", receiver.url))
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        await submit(gate, "deploy", args={"env": "prod"})  # notify: [slack]
        [post] = receiver.wait_for("/slack/api/chat.postMessage")
        await submit(gate, "transfer_funds")
        receiver.wait_for("/teams/workflows/run")
    assert post.json()["channel"] == "UDAVE"
    assert len(receiver.under("/teams")) == 1  # only the transfer


async def test_console_prints_the_request_and_its_outcome() -> None:
    out = io.StringIO()
    policy = Policy.from_yaml(policy_text("", "", channels=""))
    async with Gate(policy, MemoryStore(), channels=[ConsoleChannel(stream=out)]) as gate:
        req = await submit(gate, args={"amount": 5, "to": "x", "token": "t0p"})
        await gate.adecide(req.id, [{"type": "reject", "message": "no"}], approver="bob")
    lines = out.getvalue()
    assert f"Approval needed: transfer_funds ({req.id})" in lines
    assert "t0p" not in lines and "amount=5" in lines
    assert f"signoff approve {req.id} --as <you>" in lines
    assert f"{req.id}: ❌ Rejected by bob: no" in lines


async def receiver_pause() -> None:
    import asyncio

    await asyncio.sleep(0.02)
