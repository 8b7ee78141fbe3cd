"""Slack: Block Kit prompts to each approver, verified clicks, reject-with-reason modal,
messages updated in place on every copy, ``ok: false`` handling."""

from __future__ import annotations

import json
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels.slack import SlackChannel
from signoff.model import ToolCall
from signoff.store import AuditQuery, MemoryStore
from tests.channels.conftest import slack_callback, slack_click, state, submit
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

SLACK_ONLY = """
channels:
  slack: {bot_token: "${T_SLACK_TOKEN}", signing_secret: "${T_SLACK_SECRET}",
          api_url: "{url}/slack/api"EXTRA}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


def slack_policy(receiver: Receiver, extra: str = "", tail: str = "") -> Policy:
    from tests.channels.conftest import policy_text

    channels = SLACK_ONLY.replace("EXTRA", extra)
    return Policy.from_yaml(policy_text(receiver.url, "00" * 32, channels=channels, extra=tail))


@pytest.fixture
async def slack_gate(receiver: Receiver, secrets: dict[str, str]) -> Any:
    gate = Gate(slack_policy(receiver), MemoryStore())
    await gate.astart()
    yield gate
    await gate.aclose()


def slack(gate: Gate) -> SlackChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["slack"]
    assert isinstance(found, SlackChannel)
    return found


def buttons(post: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        e["action_id"]: e for b in post["blocks"] if b["type"] == "actions" for e in b["elements"]
    }


async def test_each_approver_gets_a_block_kit_dm_with_buttons(
    slack_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(slack_gate, args={"amount": 50_000, "to": "ACME", "api_key": "sk-live-1"})
    posts = receiver.wait_for("/slack/api/chat.postMessage", 2)
    assert sorted(p.json()["channel"] for p in posts) == ["UALICE", "UBOB"]  # finance, not erin
    post = posts[0].json()
    assert posts[0].headers["authorization"] == "Bearer xoxb-test-token"
    assert post["unfurl_links"] is False and post["unfurl_media"] is False
    assert post["text"] == "Approval needed: transfer_funds"
    assert set(buttons(post)) == {"signoff:approve", "signoff:reject"}
    assert buttons(post)["signoff:approve"]["value"] == req.id
    body = json.dumps(post, ensure_ascii=False)
    assert "sk-live-1" not in body and "••••••" in body and "50000" in body
    assert f"signoff approve {req.id}" in body  # no server: how to decide from a terminal


async def test_a_click_decides_and_every_copy_is_updated_in_place(
    slack_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(slack_gate)
    receiver.wait_for("/slack/api/chat.postMessage", 2)
    assert slack_gate.delivery is not None
    while any(r.status != "sent" for r in await slack_gate.delivery.outbox.outbox_for(req.id)):
        await asyncio_sleep()
    refs = [r.ref for r in await slack_gate.delivery.outbox.outbox_for(req.id)]
    click = slack_click(req.id, "UBOB", "signoff:approve", response_url=f"{receiver.url}/x")
    reply = await slack(slack_gate).receive(slack_callback(click), slack_gate)
    assert reply.status == 200
    assert (await state(slack_gate.store, req.id)).status == "resolved"
    updates = receiver.wait_for("/slack/api/chat.update", 2)
    assert sorted((u.json()["channel"], u.json()["ts"]) for u in updates) == sorted(
        (r["channel"], r["ts"]) for r in refs if r is not None
    )
    for update in updates:
        body = update.json()
        assert "Approved by bob" in json.dumps(body, ensure_ascii=False)
        assert not {"signoff:approve", "signoff:reject"} & set(buttons(body))


async def test_reject_opens_a_modal_and_the_reason_reaches_the_decision(
    slack_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(slack_gate)
    click = slack_click(req.id, "UALICE", "signoff:reject", response_url=f"{receiver.url}/x")
    await slack(slack_gate).receive(slack_callback(click), slack_gate)
    [opened] = receiver.wait_for("/slack/api/views.open")
    view = opened.json()["view"]
    assert opened.json()["trigger_id"] == "trig-1"
    assert view["private_metadata"] == req.id
    assert (await state(slack_gate.store, req.id)).status == "pending"  # the form decides
    submission = {
        "type": "view_submission",
        "user": {"id": "UALICE"},
        "view": {
            "id": "V1",
            "callback_id": "signoff:reject",
            "private_metadata": req.id,
            "state": {"values": {"reason": {"reason": {"value": "wrong account"}}}},
        },
    }
    reply = await slack(slack_gate).receive(slack_callback(submission), slack_gate)
    assert reply.body == {"response_action": "clear"}
    after = await state(slack_gate.store, req.id)
    assert after.calls[0].resolution == "rejected"
    assert after.calls[0].message == "wrong account"


async def test_an_unknown_slack_user_gets_an_ephemeral_refusal(
    slack_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(slack_gate)
    click = slack_click(req.id, "UHACKER", "signoff:approve", response_url=f"{receiver.url}/x")
    await slack(slack_gate).receive(slack_callback(click), slack_gate)
    [ephemeral] = receiver.under("/x")
    assert ephemeral.json()["response_type"] == "ephemeral"
    assert "slack: UHACKER" in ephemeral.json()["text"]


async def test_a_response_url_on_a_foreign_host_is_never_called(
    slack_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(slack_gate)
    click = slack_click(req.id, "UHACKER", "signoff:approve", response_url="http://10.9.9.9/x")
    reply = await slack(slack_gate).receive(slack_callback(click), slack_gate)
    assert reply.status == 200
    assert not receiver.under("/x")


async def test_an_inquiry_offers_its_choices_as_buttons(
    slack_gate: Gate, receiver: Receiver
) -> None:
    with slack_gate.context("erin", thread="t-q", agent="bot"):
        req = await slack_gate.aask("Which region?", choices=["eu-west", "us-east"], wait=False)
    assert not isinstance(req, str)
    post = receiver.wait_for("/slack/api/chat.postMessage")[0].json()
    assert post["text"] == "Question from bot"
    labels = {k: v["text"]["text"] for k, v in buttons(post).items()}
    assert labels == {
        "signoff:respond:0": "eu-west",
        "signoff:respond:1": "us-east",
        "signoff:reject": "Decline",
    }
    click = slack_click(req.id, "UALICE", "signoff:respond:1", response_url=f"{receiver.url}/x")
    await slack(slack_gate).receive(slack_callback(click), slack_gate)
    after = await state(slack_gate.store, req.id)
    assert (after.calls[0].resolution, after.calls[0].message) == ("responded", "us-east")


async def test_channel_mode_posts_once_and_mentions_the_approvers(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    gate = Gate(slack_policy(receiver, extra=", channel: C0APPROVALS"), MemoryStore())
    async with gate:
        await submit(gate)
        [post] = receiver.wait_for("/slack/api/chat.postMessage")
        body = post.json()
    assert body["channel"] == "C0APPROVALS"
    assert "<@UALICE> <@UBOB>" in body["blocks"][0]["text"]["text"]


async def test_slack_ok_false_invalid_auth_is_final_and_audited(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script(
        "/slack/api/chat.postMessage", *[answer(200, {"ok": False, "error": "invalid_auth"})] * 2
    )
    gate = Gate(slack_policy(receiver), MemoryStore())
    async with gate:
        req = await submit(gate)
        receiver.wait_for("/slack/api/chat.postMessage", 2)
        assert gate.delivery is not None
        for _ in range(100):
            rows = await gate.delivery.outbox.outbox_for(req.id)
            if all(r.status == "failed" for r in rows):
                break
            await asyncio_sleep()
        audit = await gate.store.read_audit(
            AuditQuery(request_id=req.id, event="notification_failed")
        )
        after = await state(gate.store, req.id)
    assert {r.status for r in rows} == {"failed"}
    assert all(r.attempts == 1 for r in rows)
    assert len(audit) == 2 and "invalid_auth" in audit[0].data["error"]
    assert after.status == "pending"  # a channel failure never decides anything


async def test_slack_ratelimited_is_retried(receiver: Receiver, secrets: dict[str, str]) -> None:
    receiver.script(
        "/slack/api/chat.postMessage",
        answer(429, {"ok": False, "error": "ratelimited"}, Retry_After="0"),
    )
    gate = Gate(slack_policy(receiver), MemoryStore())
    async with gate:
        await gate.asubmit(
            [ToolCall("transfer_funds", {"amount": 1, "to": "x"})],
            gate.make_context("erin", thread="t-r"),
        )
        posts = receiver.wait_for("/slack/api/chat.postMessage", 3)
    assert (
        sorted(p.json()["channel"] for p in posts).count("UALICE")
        + sorted(p.json()["channel"] for p in posts).count("UBOB")
        == 3
    )


async def asyncio_sleep() -> None:
    import asyncio

    await asyncio.sleep(0.05)
