"""Standard Webhooks: signed created/decided/expired events with a stable webhook-id across
retries, 410 Gone is final, event filters, and signed inbound decisions (edits too)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels.webhooks import WebhookChannel, verify
from signoff.store import AuditQuery, MemoryStore
from tests.channels.conftest import (
    WEBHOOK_SECRET,
    policy_text,
    state,
    submit,
    webhook_callback,
)
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

HOOKS = """
channels:
  webhooks:
    - {url: "{url}/hook", secret: "${T_WEBHOOK_SECRET}"EVENTS}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""

EDITABLE = """
  pay:
    default: require_approval
    approvers: {roles: [finance]}
    allowed_decisions: [approve, edit, reject]
    editable_args: [amount]
    timeout: 10m
"""


def hooks_policy(receiver: Receiver, events: str = "", timeout: str = "10m") -> Policy:
    text = policy_text(receiver.url, "", channels=HOOKS.replace("EVENTS", events))
    text = text.replace("timeout: 10m", f"timeout: {timeout}", 1)
    return Policy.from_yaml(text.replace("\ntools:\n", "\ntools:" + EDITABLE, 1))


@pytest.fixture
async def hook_gate(receiver: Receiver, secrets: dict[str, str]) -> Any:
    gate = Gate(hooks_policy(receiver), MemoryStore())
    await gate.astart()
    yield gate
    await gate.aclose()


def hooks(gate: Gate) -> WebhookChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["webhooks"]
    assert isinstance(found, WebhookChannel)
    return found


async def test_created_and_decided_events_are_signed_per_standard_webhooks(
    hook_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(hook_gate, args={"amount": 1, "to": "x", "password": "hunter2"})
    [created] = receiver.wait_for("/hook")
    await hook_gate.adecide(req.id, [{"type": "approve"}], approver="alice")
    decided = receiver.wait_for("/hook", 2)[1]
    for event in (created, decided):
        assert verify(
            [WEBHOOK_SECRET],
            event.headers,
            event.body,
            now=float(event.headers["webhook-timestamp"]),
        )
    assert created.json()["type"] == "approval.created"
    assert created.json()["data"]["request_id"] == req.id
    assert "hunter2" not in created.body.decode()
    body = decided.json()
    assert body["type"] == "approval.decided"
    assert body["data"]["status"] == "resolved"
    assert body["data"]["calls"][0]["resolution"] == "approved"
    assert body["data"]["calls"][0]["resolved_by"] == "alice"
    assert created.headers["webhook-id"] != decided.headers["webhook-id"]


async def test_an_expired_request_sends_an_expired_event(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    gate = Gate(hooks_policy(receiver, timeout="1s"), MemoryStore(), sweep_interval=0.05)
    async with gate:
        req = await submit(gate)
        events = receiver.wait_for("/hook", 2)
        after = await state(gate.store, req.id)
    assert [e.json()["type"] for e in events] == ["approval.created", "approval.expired"]
    assert events[1].json()["data"]["calls"][0]["resolution"] == "expired"
    assert after.status == "expired"


async def test_a_retried_event_keeps_its_webhook_id(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script("/hook", answer(503), answer(502))
    async with Gate(hooks_policy(receiver), MemoryStore()) as gate:
        await submit(gate)
        attempts = receiver.wait_for("/hook", 3)
    assert len({a.headers["webhook-id"] for a in attempts}) == 1
    assert all(
        verify([WEBHOOK_SECRET], a.headers, a.body, float(a.headers["webhook-timestamp"]))
        for a in attempts
    )


async def test_410_gone_is_final_and_audited(receiver: Receiver, secrets: dict[str, str]) -> None:
    receiver.script("/hook", answer(410))
    async with Gate(hooks_policy(receiver), MemoryStore()) as gate:
        req = await submit(gate)
        receiver.wait_for("/hook")
        assert gate.delivery is not None
        while (await gate.delivery.outbox.outbox_for(req.id))[0].status == "sending":
            await asyncio.sleep(0.02)
        [row] = await gate.delivery.outbox.outbox_for(req.id)
        audit = await gate.store.read_audit(
            AuditQuery(request_id=req.id, event="notification_failed")
        )
    assert (row.status, row.attempts) == ("failed", 1)
    assert "HTTP 410" in audit[0].data["error"]
    assert len(receiver.under("/hook")) == 1


async def test_a_subscriber_gets_only_the_events_it_asked_for(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    async with Gate(hooks_policy(receiver, ", events: [decided]"), MemoryStore()) as gate:
        req = await submit(gate)
        await gate.adecide(req.id, [{"type": "reject", "message": "no"}], approver="bob")
        [event] = receiver.wait_for("/hook")
    assert event.json()["type"] == "approval.decided"
    assert event.json()["data"]["calls"][0]["message"] == "no"


async def test_a_signed_caller_may_decide_with_full_decisions_including_edits(
    hook_gate: Gate,
) -> None:
    req = await submit(hook_gate, "pay", args={"amount": 900, "to": "ACME"})
    call_id = req.calls[0].tool_call_id
    body = {
        "request_id": req.id,
        "approver": "alice",
        "decisions": [
            {
                "tool_call_id": call_id,
                "type": "edit",
                "edited_action": {"name": "pay", "args": {"amount": 90, "to": "ACME"}},
            }
        ],
    }
    reply = await hooks(hook_gate).receive(webhook_callback(body), hook_gate)
    assert reply.status == 200 and reply.body["status"] == "resolved"
    after = await state(hook_gate.store, req.id)
    assert after.calls[0].resolution == "edited"
    assert after.calls[0].action.args == {"amount": 90, "to": "ACME"}
    assert after.decisions[0].channel == "webhook"


async def test_a_malformed_inbound_body_is_a_400_naming_the_field(hook_gate: Gate) -> None:
    req = await submit(hook_gate)
    reply = await hooks(hook_gate).receive(
        webhook_callback({"request_id": req.id, "action": "approve"}), hook_gate
    )
    assert reply.status == 400 and "approver" in reply.body["error"]
    edit_other = {
        "request_id": req.id,
        "approver": "alice",
        "decisions": [{"type": "edit", "edited_action": {"name": "x", "args": {}}}],
    }
    reply = await hooks(hook_gate).receive(webhook_callback(edit_other), hook_gate)
    assert reply.status == 400
    assert (await state(hook_gate.store, req.id)).status == "pending"
