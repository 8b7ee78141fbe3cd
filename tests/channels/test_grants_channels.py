"""Grants and channels: a chat button (Slack, Discord, LINE) approves one call and never creates
a grant; webhook subscribers hear of a grant an approval created, and list the new event
names."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signoff import Gate
from signoff.channels import Inbound
from signoff.channels.config import WEBHOOK_EVENTS
from signoff.channels.discord import DiscordChannel
from signoff.channels.line import LineChannel
from signoff.channels.slack import SlackChannel
from signoff.model import ApprovalRequest, ToolCall, utcnow
from signoff.model.resolution import Transition
from signoff.store import AuditQuery, MemoryStore, SQLiteStore
from tests.channels.conftest import (
    discord_callback,
    discord_click,
    line_callback,
    line_postback,
    slack_callback,
    slack_click,
    state,
    submit,
)
from tests.channels.receiver import Receiver
from tests.channels.test_webhooks import hooks_policy

pytestmark = pytest.mark.asyncio


def click(
    gate: Gate, channel: str, req: ApprovalRequest, key: Ed25519PrivateKey, url: str
) -> tuple[object, Inbound]:
    assert gate.delivery is not None
    messenger = gate.delivery.messengers[channel]
    if channel == "slack":
        assert isinstance(messenger, SlackChannel)
        payload = slack_click(req.id, "UBOB", "signoff:approve", response_url=f"{url}/x")
        return messenger, slack_callback(payload)
    if channel == "discord":
        assert isinstance(messenger, DiscordChannel)
        payload = discord_click(req.id, "1002", f"signoff:approve:{req.id}")
        return messenger, discord_callback(key, payload)
    assert isinstance(messenger, LineChannel)
    return messenger, line_callback([line_postback(f"a=approve&r={req.id}", "Ubob")])


@pytest.mark.parametrize("channel", ["slack", "discord", "line"])
async def test_a_chat_approve_button_never_creates_a_grant(
    gate: Gate, receiver: Receiver, discord_key: Ed25519PrivateKey, channel: str
) -> None:
    req = await submit(gate, thread="t-chat")
    messenger, inbound = click(gate, channel, req, discord_key, receiver.url)
    reply = await messenger.receive(inbound, gate)  # type: ignore[attr-defined]
    assert reply.status == 200
    after = await state(gate.store, req.id)
    assert after.calls[0].resolution == "approved" and after.calls[0].resolved_by == "bob"
    [decision] = after.decisions
    assert decision.scope == "call" and decision.grant_id is None
    assert await gate.alist_grants() == []
    await gate.store.flush_audit()
    assert await gate.store.read_audit(AuditQuery(event="grant_created")) == []
    # the next call on the same thread still asks a human
    ctx = gate.make_context("erin", thread="t-chat", agent="bot")
    verdict = gate.check(ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"}), ctx)
    assert verdict.needs_approval


async def test_webhook_subscribers_may_list_the_grant_and_recovery_events() -> None:
    for name in ("grant_created", "grant_revoked", "grant_expired", "edit_rerouted"):
        assert name in WEBHOOK_EVENTS
    assert "reattached" in WEBHOOK_EVENTS and "reconciled" in WEBHOOK_EVENTS


async def test_an_approval_that_grants_is_told_to_webhook_subscribers(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    events = ", events: [created, grant_created]"
    async with Gate(hooks_policy(receiver, events), MemoryStore()) as gate:
        req = await submit(gate)
        receiver.wait_for("/hook")
        decided = await gate.adecide(
            req.id, [{"type": "approve", "scope": "thread"}], approver="alice"
        )
        grant_id = decided.decisions[-1].grant_id
        assert grant_id is not None
        told = receiver.wait_for("/hook", 2)[1].json()
        assert told["type"] == "approval.grant_created"
        assert told["data"]["grant_ids"] == [grant_id]
        assert told["data"]["request_id"] == req.id


async def test_a_reattached_request_is_told_to_webhook_subscribers(
    receiver: Receiver, secrets: dict[str, str], tmp_path: Path
) -> None:
    """A restarted agent takes its open request up again: subscribers of ``reattached`` are
    told (the event's row is stored by the commit that re-attaches; before, nothing queued
    it, so the advertised event never went out)."""
    events = ", events: [created, reattached]"
    db = tmp_path / "signoff.db"
    async with Gate(hooks_policy(receiver, events), SQLiteStore(db)) as before_restart:
        req = await submit(before_restart, thread="t-restart")
        created = receiver.wait_for("/hook")[0].json()
    async with SQLiteStore(db) as store:  # the first run died long ago: its lease lapsed
        await store.update_request(req.id, _lease_lapsed)
    async with Gate(hooks_policy(receiver, events), SQLiteStore(db)) as restarted:
        again = await submit(restarted, thread="t-restart")
        told = receiver.wait_for("/hook", 2)[1].json()
    assert created["type"] == "approval.created"
    assert again.id == req.id
    assert told["type"] == "approval.reattached"
    assert told["data"]["request_id"] == req.id


def _lease_lapsed(r: ApprovalRequest) -> Transition:
    new = r.copy_for_update()
    new.lease_until = utcnow() - timedelta(seconds=1)
    new.version += 1
    return Transition(new)
