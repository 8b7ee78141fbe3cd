"""Discord: the app's DMs with buttons (nonce-guarded), the interactions endpoint (PING,
401, click → UPDATE_MESSAGE, reject modal), edits of every copy, and webhook mode."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signoff import Gate, Policy
from signoff.channels.discord import DiscordChannel
from signoff.store import MemoryStore
from tests.channels.conftest import (
    discord_callback,
    discord_click,
    policy_text,
    public_hex,
    state,
    submit,
)
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

APP = """
channels:
  discord: {bot_token: "${T_DISCORD_TOKEN}", application_id: "42", public_key: "{pk}",
            api_url: "{url}/discord/api/v10"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""

HOOK = """
serve: {public_url: "https://signoff.example"}
channels:
  discord: {webhook_url: "${T_DISCORD_WEBHOOK}"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


@pytest.fixture
async def discord_gate(
    receiver: Receiver, discord_key: Ed25519PrivateKey, secrets: dict[str, str]
) -> Any:
    text = policy_text(receiver.url, public_hex(discord_key), channels=APP)
    gate = Gate(Policy.from_yaml(text), MemoryStore())
    await gate.astart()
    yield gate
    await gate.aclose()


def discord(gate: Gate) -> DiscordChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["discord"]
    assert isinstance(found, DiscordChannel)
    return found


def custom_ids(body: dict[str, Any]) -> list[str]:
    return [c.get("custom_id") or c["url"] for row in body["components"] for c in row["components"]]


async def sent(gate: Gate, request_id: str) -> None:
    assert gate.delivery is not None
    while any(r.status != "sent" for r in await gate.delivery.outbox.outbox_for(request_id)):
        await asyncio.sleep(0.02)


async def test_ping_gets_pong_and_a_bad_signature_gets_401(
    discord_gate: Gate, discord_key: Ed25519PrivateKey
) -> None:
    ping = {"id": "1", "type": 1, "application_id": "42", "token": "t", "version": 1}
    reply = await discord(discord_gate).receive(discord_callback(discord_key, ping), discord_gate)
    assert (reply.status, reply.body) == (200, {"type": 1})
    probe = discord_callback(Ed25519PrivateKey.generate(), ping)  # Discord's routine check
    assert (await discord(discord_gate).receive(probe, discord_gate)).status == 401
    tampered = discord_callback(discord_key, ping)
    tampered = type(tampered)(tampered.headers, tampered.body + b" ", tampered.now)
    assert (await discord(discord_gate).receive(tampered, discord_gate)).status == 401
    no_headers = type(tampered)({}, tampered.body, tampered.now)
    assert (await discord(discord_gate).receive(no_headers, discord_gate)).status == 401


async def test_each_approver_gets_a_dm_with_buttons_and_an_idempotent_nonce(
    discord_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(discord_gate)
    opened = receiver.wait_for("/discord/api/v10/users/@me/channels", 2)
    assert sorted(o.json()["recipient_id"] for o in opened) == ["1001", "1002"]
    posts = [
        p for p in receiver.wait_for("/discord/api/v10/channels/", 2) if p.path.endswith("messages")
    ]
    body = posts[0].json()
    assert posts[0].headers["authorization"] == "Bot discord-bot-token"
    assert body["enforce_nonce"] is True and 0 < len(body["nonce"]) <= 25
    assert len({p.json()["nonce"] for p in posts}) == 2
    assert custom_ids(body) == [f"signoff:approve:{req.id}", f"signoff:reject:{req.id}"]
    assert body["allowed_mentions"]["parse"] == []


async def test_a_click_replaces_the_message_and_other_copies_are_edited(
    discord_gate: Gate, discord_key: Ed25519PrivateKey, receiver: Receiver
) -> None:
    req = await submit(discord_gate)
    await sent(discord_gate, req.id)
    click = discord_click(req.id, "1002", f"signoff:approve:{req.id}")
    reply = await discord(discord_gate).receive(discord_callback(discord_key, click), discord_gate)
    assert reply.body["type"] == 7
    assert reply.body["data"]["components"] == []
    assert "Approved by bob" in json.dumps(reply.body, ensure_ascii=False)
    edits = [r for r in receiver.wait_for("/discord/api/v10/channels/", 4) if r.method == "PATCH"]
    assert len(edits) == 2
    assert all("Approved by bob" in e.body.decode() for e in edits)
    assert (await state(discord_gate.store, req.id)).calls[0].resolved_by == "bob"


async def test_reject_asks_for_a_reason_in_a_modal(
    discord_gate: Gate, discord_key: Ed25519PrivateKey
) -> None:
    req = await submit(discord_gate)
    click = discord_click(req.id, "1001", f"signoff:reject:{req.id}")
    reply = await discord(discord_gate).receive(discord_callback(discord_key, click), discord_gate)
    assert reply.body["type"] == 9
    assert reply.body["data"]["custom_id"] == f"signoff:reason:{req.id}"
    assert (await state(discord_gate.store, req.id)).status == "pending"
    submitted = {
        "id": "i-2",
        "type": 5,
        "member": {"user": {"id": "1001"}},
        "data": {
            "custom_id": f"signoff:reason:{req.id}",
            "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": "reason", "value": "too much"}]}
            ],
        },
    }
    reply = await discord(discord_gate).receive(
        discord_callback(discord_key, submitted), discord_gate
    )
    assert reply.body["type"] == 7
    after = await state(discord_gate.store, req.id)
    assert (after.calls[0].resolution, after.calls[0].message) == ("rejected", "too much")


async def test_a_discord_429_waits_for_retry_after(
    receiver: Receiver, discord_key: Ed25519PrivateKey, secrets: dict[str, str]
) -> None:
    receiver.script(
        "/discord/api/v10/users/@me/channels",
        answer(429, {"retry_after": 0.3, "global": False}, Retry_After="1"),
    )
    text = policy_text(receiver.url, public_hex(discord_key), channels=APP)
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        await submit(gate)
        opened = receiver.wait_for("/discord/api/v10/users/@me/channels", 3)
    first, retried = opened[0], [o for o in opened[1:] if o.body == opened[0].body]
    assert retried and retried[0].at - first.at >= 0.3  # JSON retry_after, not the header


async def test_webhook_mode_posts_an_embed_with_a_link_and_edits_it_afterwards(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, secrets: dict[str, str]
) -> None:
    monkeypatch.setenv("T_DISCORD_WEBHOOK", f"{receiver.url}/discord-hook/123/tok")
    text = policy_text(receiver.url, "00" * 32, channels="", extra=HOOK)
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        [post] = receiver.wait_for("/discord-hook/123/tok")
        await sent(gate, req.id)
        await gate.adecide(req.id, [{"type": "approve"}], approver="alice")
        [edit] = [r for r in receiver.wait_for("/discord-hook/123/tok", 2) if r.method == "PATCH"]
        assert discord(gate).bot is False
        hook = await discord(gate).receive(discord_callback(Ed25519PrivateKey.generate(), {}), gate)
    assert "wait=true" in post.query and "with_components=true" in post.query
    [button] = post.json()["components"][0]["components"]
    assert button == {
        "type": 2,
        "style": 5,
        "label": "Open",
        "url": f"https://signoff.example/requests/{req.id}",
    }
    assert edit.path.endswith("/messages/" + post.json().get("id", edit.path.rsplit("/", 1)[1]))
    assert "Approved by alice" in edit.body.decode()
    assert hook.status == 404  # a plain webhook has no interactions endpoint


async def test_a_question_offers_its_choices_as_buttons_and_a_click_answers(
    discord_gate: Gate, discord_key: Ed25519PrivateKey, receiver: Receiver
) -> None:
    with discord_gate.context("erin", thread="t-q", agent="bot"):
        req = await discord_gate.aask("Which region?", choices=["eu", "us"], wait=False)
    assert not isinstance(req, str)
    posts = [
        p for p in receiver.wait_for("/discord/api/v10/channels/", 2) if p.path.endswith("messages")
    ]
    assert custom_ids(posts[0].json()) == [
        f"signoff:respond:{req.id}:0",
        f"signoff:respond:{req.id}:1",
        f"signoff:reject:{req.id}",
    ]
    click = discord_click(req.id, "1001", f"signoff:respond:{req.id}:0")
    reply = await discord(discord_gate).receive(discord_callback(discord_key, click), discord_gate)
    assert reply.body["type"] == 7
    after = await state(discord_gate.store, req.id)
    assert (after.calls[0].resolution, after.calls[0].message) == ("responded", "eu")
