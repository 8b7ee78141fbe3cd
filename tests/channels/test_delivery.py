"""The outbox worker: Retry-After honoured, 5xx retried, permanent errors final, no prompt
after a decision, every copy updated on resolution, escalation and reminders, a process
without secrets queueing for one that has them, and a sender killed mid-send."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signoff import Gate, Policy
from signoff.store import AuditQuery, MemoryStore, SQLiteStore
from tests.channels.conftest import (
    discord_callback,
    discord_click,
    policy_text,
    state,
    submit,
)
from tests.channels.receiver import Receiver, answer
from tests.store.factories import subprocess_env

pytestmark = pytest.mark.asyncio

ONE = """
channels:
  {channel}
  delivery: {{backoff: 0.05, backoff_cap: 0.2, poll: 0.2{extra}}}
"""
TEAMS = 'teams: {workflow_url: "${T_TEAMS_URL}"}'
HOOK = 'webhooks: [{url: "{url}/hook", secret: "${T_WEBHOOK_SECRET}"}]'
SLACK = (
    'slack: {bot_token: "${T_SLACK_TOKEN}", signing_secret: "${T_SLACK_SECRET}", '
    'api_url: "{url}/slack/api"}'
)
TIMED = """
  risky:
    default: require_approval
    approvers: {roles: [finance]}
    timeout: 3s
    on_timeout: escalate
    escalate_to: {roles: [ops]}
    escalate_after: 1s
"""


def one(receiver: Receiver, channel: str, *, extra: str = "", tail: str = "") -> Policy:
    section = ONE.format(channel=channel, extra=extra)
    text = policy_text(receiver.url, "", channels=section, extra=tail)
    return Policy.from_yaml(text.replace("\ntools:\n", "\ntools:" + TIMED, 1))


async def rows(gate: Gate, request_id: str) -> list[Any]:
    assert gate.delivery is not None
    return await gate.delivery.outbox.outbox_for(request_id)


async def until(check: Any, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while not await check():
        if loop.time() > give_up:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


# ---------------------------------------------------------------- retries
async def test_429_waits_at_least_retry_after(receiver: Receiver, secrets: dict[str, str]) -> None:
    receiver.script("/teams", answer(429, Retry_After="1"))
    async with Gate(one(receiver, TEAMS), MemoryStore()) as gate:
        await submit(gate)
        first, second = receiver.wait_for("/teams", 2)
    assert second.at - first.at >= 1.0


async def test_5xx_is_retried_with_backoff_until_it_succeeds(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script("/teams", answer(500), answer(503), answer(504))
    async with Gate(one(receiver, TEAMS), MemoryStore()) as gate:
        req = await submit(gate)
        receiver.wait_for("/teams", 4)
        await until(lambda: _status(gate, req.id, "sent"))
        [row] = await rows(gate, req.id)
        audit = await audited(gate, req.id, "notified")
    assert (row.attempts, row.status) == (4, "sent")
    assert [a.actor for a in audit] == ["teams"]


async def test_a_permanent_error_is_not_retried(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script("/teams", answer(400, {"error": "bad card"}))
    async with Gate(one(receiver, TEAMS), MemoryStore()) as gate:
        req = await submit(gate)
        await until(lambda: _status(gate, req.id, "failed"))
        [row] = await rows(gate, req.id)
    assert row.attempts == 1 and "HTTP 400" in (row.error or "")
    assert len(receiver.under("/teams")) == 1


async def test_retries_give_up_after_max_attempts(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script("/teams", *[answer(502)] * 5)
    async with Gate(one(receiver, TEAMS, extra=", max_attempts: 3"), MemoryStore()) as gate:
        req = await submit(gate)
        await until(lambda: _status(gate, req.id, "failed"))
        audit = await audited(gate, req.id, "notification_failed")
    assert len(receiver.under("/teams")) == 3
    assert audit[0].data["attempts"] == 3


# ---------------------------------------------------------------- decided requests
async def test_no_prompt_is_sent_after_the_request_was_decided(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script("/slack/api/chat.postMessage", *[answer(503, Retry_After="30")] * 2)
    async with Gate(one(receiver, SLACK, extra=""), MemoryStore()) as gate:
        req = await submit(gate)
        receiver.wait_for("/slack/api/chat.postMessage", 2)
        await until(lambda: _all(gate, req.id, lambda r: r.status == "pending" and r.attempts))
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        after = await rows(gate, req.id)
    assert {r.status for r in after} == {"cancelled"}
    assert len(receiver.under("/slack")) == 2  # the two first attempts, nothing since


async def test_a_decision_during_the_send_still_updates_that_message(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    async with Gate(one(receiver, SLACK), MemoryStore()) as gate:
        receiver.hang.set()
        req = await submit(gate)
        await until(lambda: _all(gate, req.id, lambda r: r.status == "sending"))
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        receiver.hang.clear()
        updates = receiver.wait_for("/slack/api/chat.update", 2)
    assert all("Approved by alice" in u.body.decode() for u in updates)


async def test_a_decision_anywhere_updates_every_message_on_every_channel(
    gate: Gate, receiver: Receiver, discord_key: Ed25519PrivateKey
) -> None:
    req = await submit(gate)
    await until(lambda: _all(gate, req.id, lambda r: r.status == "sent"))
    click = discord_click(req.id, "1001", f"signoff:approve:{req.id}")
    assert gate.delivery is not None
    receiver_of = gate.delivery.receiver("discord")
    await receiver_of.receive(discord_callback(discord_key, click), gate)
    slack_updates = receiver.wait_for("/slack/api/chat.update", 2)
    discord_edits = [
        r for r in receiver.wait_for("/discord/api/v10/channels/", 4) if r.method == "PATCH"
    ]
    line_pushes = receiver.wait_for("/line/v2/bot/message/push", 4)[2:]
    teams_cards = receiver.wait_for("/teams", 2)[1:]
    hooks = receiver.wait_for("/hook", 2)[1:]
    for message in (*slack_updates, *discord_edits, *line_pushes, *teams_cards):
        assert "Approved by alice" in message.body.decode()
    assert len(discord_edits) == 2
    assert hooks[0].json()["type"] == "approval.decided"


# ---------------------------------------------------------------- escalation, reminders
async def test_escalation_notifies_the_next_group(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    gate = Gate(one(receiver, SLACK), MemoryStore(), sweep_interval=0.05)
    async with gate:
        req = await submit(gate, "risky", args={})
        posts = receiver.wait_for("/slack/api/chat.postMessage", 3)
        escalated = await state(gate.store, req.id)
    assert sorted(p.json()["channel"] for p in posts[:2]) == ["UALICE", "UBOB"]
    assert posts[2].json()["channel"] == "UDAVE"
    assert posts[2].json()["text"] == "Escalated: Approval needed: risky"
    assert escalated.escalated


async def test_reminders_go_out_before_the_deadline(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    section = ONE.format(channel=SLACK, extra="").replace(
        "  delivery:", "  remind_before: [2s, 1h]\n  delivery:"
    )
    text = policy_text(receiver.url, "", channels=section)
    short = "\n  risky:\n    default: require_approval\n    approvers: {roles: [finance]}\n"
    text = text.replace("\ntools:\n", "\ntools:" + short + "    timeout: 3s\n", 1)
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate, "risky", args={})
        posts = receiver.wait_for("/slack/api/chat.postMessage", 4)
        planned = [r for r in await rows(gate, req.id) if r.kind == "reminder"]
    assert [p.json()["text"] for p in posts[2:]] == ["Reminder: Approval needed: risky"] * 2
    # one reminder per approver 2 s before the deadline; none for 1 h (the request is shorter)
    assert len(planned) == 2
    assert {round((req.expires_at - r.next_at).total_seconds()) for r in planned} == {2}


async def test_a_reminder_skips_whoever_already_decided(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    section = ONE.format(channel=SLACK, extra="").replace(
        "  delivery:", "  remind_before: [2s]\n  delivery:"
    )
    text = policy_text(receiver.url, "", channels=section)
    two = (
        "\n  risky:\n    default: require_approval\n    approvers: {roles: [finance], quorum: 2}\n"
    )
    text = text.replace("\ntools:\n", "\ntools:" + two + "    timeout: 3s\n", 1)
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate, "risky", args={})
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        settled = ("sent", "cancelled", "failed")
        await until(
            lambda: _all(gate, req.id, lambda r: r.kind != "reminder" or r.status in settled)
        )
        reminders = [r for r in await rows(gate, req.id) if r.kind == "reminder"]
    assert {(r.person, r.status) for r in reminders} == {("alice", "cancelled"), ("bob", "sent")}
    texts = [p.json() for p in receiver.under("/slack/api/chat.postMessage")]
    assert [t["channel"] for t in texts if t["text"].startswith("Reminder")] == ["UBOB"]


# ---------------------------------------------------------------- processes
async def test_a_process_without_secrets_queues_and_the_server_sends(
    receiver: Receiver, secrets: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = one(receiver, TEAMS)
    monkeypatch.delenv("T_TEAMS_URL")
    async with Gate(policy, SQLiteStore(tmp_path / "s.db")) as cli:  # e.g. an agent
        req = await submit(cli)
        decided = await submit(cli)
        await cli.adecide(decided.id, [{"type": "approve"}], approver="alice")
    assert receiver.requests == []
    monkeypatch.setenv("T_TEAMS_URL", secrets["T_TEAMS_URL"])
    async with Gate(policy, SQLiteStore(tmp_path / "s.db")) as server:
        [post] = receiver.wait_for("/teams")
        await until(lambda: _status(server, decided.id, "cancelled"))
    assert req.id in post.body.decode()


@pytest.mark.slow
async def test_a_sender_killed_mid_send_sends_after_restart(
    receiver: Receiver, secrets: dict[str, str], tmp_path: Path
) -> None:
    policy_file = tmp_path / "signoff.yaml"
    text = policy_text(receiver.url, "", channels=ONE.format(channel=HOOK, extra=", lease: 1s"))
    policy_file.write_text(text.replace("{url}", receiver.url))
    db = tmp_path / "s.db"
    receiver.hang.set()
    env = {**subprocess_env(), **secrets}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.channels.crash_sender", str(db), str(policy_file)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=os.getcwd(),
    )
    try:
        assert child.stdout is not None
        request_id = (await asyncio.to_thread(child.stdout.readline)).decode().strip()
        [stuck] = await asyncio.to_thread(receiver.wait_for, "/hook", 1, 30.0)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    receiver.hang.clear()
    async with Gate(Policy.load(policy_file), SQLiteStore(db)) as restarted:
        delivered = await asyncio.to_thread(receiver.wait_for, "/hook", 2, 30.0)
        await until(lambda: _status(restarted, request_id, "sent"))
        [row] = await rows(restarted, request_id)
    assert delivered[1].headers["webhook-id"] == stuck.headers["webhook-id"] == row.id
    assert row.attempts == 2
    assert delivered[1].json()["data"]["request_id"] == request_id


async def audited(gate: Gate, request_id: str, event: str) -> list[Any]:
    """The request's ``event`` audit rows, once there is one: the worker writes them right
    after it marks the outbox row, so a test that saw the row may not see them yet."""
    query = AuditQuery(request_id=request_id, event=event)  # type: ignore[arg-type]

    async def found() -> bool:
        return bool(await gate.store.read_audit(query))

    await until(found)
    return await gate.store.read_audit(query)


async def _status(gate: Gate, request_id: str, status: str) -> bool:
    return await _all(gate, request_id, lambda r: r.status == status)


async def _all(gate: Gate, request_id: str, test: Any) -> bool:
    found = await rows(gate, request_id)
    return bool(found) and all(test(r) for r in found)


# ---------------------------------------------------------------- quarantine
async def test_a_message_for_an_unreadable_request_is_cancelled_quietly(
    receiver: Receiver,
    secrets: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import contextlib
    import dataclasses
    import logging
    import sqlite3
    from datetime import timedelta

    from signoff.model import utcnow

    path = tmp_path / "signoff.db"
    async with Gate(one(receiver, TEAMS), SQLiteStore(path)) as gate:
        req = await submit(gate)
        receiver.wait_for("/teams", 1)
        await until(lambda: _status(gate, req.id, "sent"))
        assert gate.delivery is not None
        [sent] = await rows(gate, req.id)
        later = dataclasses.replace(
            sent, id=f"{sent.id}-later", status="sending", next_at=utcnow() + timedelta(hours=1)
        )
        await gate.delivery.outbox.enqueue_outbox([later])
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("UPDATE requests SET doc = '{}' WHERE id = ?", (req.id,))
            conn.commit()
        with caplog.at_level(logging.ERROR):
            await gate.delivery.deliver(later)
        found = {r.id: r for r in await rows(gate, req.id)}
    assert (found[later.id].status, found[sent.id].status) == ("cancelled", "sent")
    assert "Field required" in (found[later.id].error or "")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.name for r in errors] == ["signoff.store"]  # logged once, by the store
