"""Telegram: sendMessage with an inline keyboard of opaque tokens, callbacks behind the
webhook secret (each update_id once), force-reply reasons, /start onboarding, outcome edits."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels import Inbound, telegram
from signoff.channels.telegram import TelegramChannel, link_code, seal, unseal
from signoff.model import ApprovalRequest
from signoff.store import MemoryStore
from tests.channels.conftest import (
    PEOPLE,
    TELEGRAM_SECRET,
    TELEGRAM_TOKEN,
    policy_text,
    state,
    submit,
)
from tests.channels.platforms import telegram_callback, telegram_click, telegram_text
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

TELEGRAM_ONLY = """
channels:
  telegram: {bot_token: "${T_TELEGRAM_TOKEN}", webhook_secret: "${T_TELEGRAM_SECRET}",
             api_url: "{url}/telegram"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""
BOT = f"/telegram/bot{TELEGRAM_TOKEN}"


@pytest.fixture
async def tg_gate(receiver: Receiver, secrets: dict[str, str]) -> Any:
    text = policy_text(receiver.url, "", channels=TELEGRAM_ONLY)
    gate = Gate(Policy.from_yaml(text), MemoryStore())
    await gate.astart()
    yield gate
    await gate.aclose()


def channel(gate: Gate) -> TelegramChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["telegram"]
    assert isinstance(found, TelegramChannel)
    return found


async def all_sent(gate: Gate, req: ApprovalRequest) -> None:
    assert gate.delivery is not None
    while any(r.status != "sent" for r in await gate.delivery.outbox.outbox_for(req.id)):
        await asyncio.sleep(0.02)


def buttons(post: Any) -> dict[str, str]:
    rows = post.json()["reply_markup"]["inline_keyboard"]
    return {b["text"]: b.get("callback_data") or b.get("url") for row in rows for b in row}


async def test_each_approver_gets_a_message_whose_buttons_carry_opaque_tokens(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    posts = receiver.wait_for(f"{BOT}/sendMessage", 2)
    assert sorted(p.json()["chat_id"] for p in posts) == ["5001", "5002"]
    post = posts[0].json()
    assert post["parse_mode"] == "HTML" and post["link_preview_options"] == {"is_disabled": True}
    assert post["text"].startswith("<pre>Approval needed: transfer_funds")
    tokens = buttons(posts[0])
    assert set(tokens) == {"Approve", "Reject"}
    for token in tokens.values():
        assert len(token.encode()) <= 64 and req.id not in token
    assert unseal(TELEGRAM_SECRET, tokens["Approve"]) == ("a", req.id)


async def test_an_approve_click_decides_answers_the_query_and_edits_every_copy(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    receiver.wait_for(f"{BOT}/sendMessage", 2)
    await all_sent(tg_gate, req)
    click = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 5001)
    reply = await channel(tg_gate).receive(telegram_callback(click), tg_gate)
    assert reply.body == {"result": "decided"}
    [answered] = receiver.wait_for(f"{BOT}/answerCallbackQuery")
    assert answered.json()["callback_query_id"] == click["callback_query"]["id"]
    assert "Approved by alice" in answered.json()["text"]
    edits = receiver.wait_for(f"{BOT}/editMessageText", 2)
    assert {e.json()["chat_id"] for e in edits} == {"5001", "5002"}
    assert all("reply_markup" not in e.json() for e in edits)  # the keyboard is gone
    assert "✅ Approved by alice" in edits[0].json()["text"]
    after = await state(tg_gate.store, req.id)
    assert (after.status, after.decisions[0].channel) == ("resolved", "telegram")


async def test_a_wrong_or_missing_secret_token_is_refused_before_parsing(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    click = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 5001)
    tg = channel(tg_gate)
    assert (await tg.receive(telegram_callback(click, secret="guessed"), tg_gate)).status == 401
    assert (await tg.receive(telegram_callback(click, secret=None), tg_gate)).status == 401
    assert (await state(tg_gate.store, req.id)).status == "pending"


async def test_a_replayed_update_id_is_acknowledged_and_ignored(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    click = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 5001)
    tg = channel(tg_gate)
    assert (await tg.receive(telegram_callback(click), tg_gate)).body == {"result": "decided"}
    again = await tg.receive(telegram_callback(click), tg_gate)
    assert (again.status, again.body) == (200, {"result": "replayed"})
    assert len(receiver.under(f"{BOT}/answerCallbackQuery")) == 1
    assert len((await state(tg_gate.store, req.id)).decisions) == 1


async def test_an_unknown_telegram_user_is_refused_with_their_id(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    click = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 9999)
    reply = await channel(tg_gate).receive(telegram_callback(click), tg_gate)
    assert reply.body == {"result": "unknown user"}
    [answered] = receiver.wait_for(f"{BOT}/answerCallbackQuery")
    assert answered.json()["show_alert"] is True and "telegram: 9999" in answered.json()["text"]
    assert (await state(tg_gate.store, req.id)).status == "pending"


async def test_a_person_without_the_role_may_not_decide(tg_gate: Gate, receiver: Receiver) -> None:
    req = await submit(tg_gate)
    click = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 5004)  # dave: ops, not finance
    reply = await channel(tg_gate).receive(telegram_callback(click), tg_gate)
    assert reply.body == {"result": "refused"}
    assert (await state(tg_gate.store, req.id)).status == "pending"


@pytest.mark.parametrize(
    "data",
    [
        "a|REQ",  # the request in clear: not a token of ours
        "",
        "x" * 65,
        "token-made-with-another-secret",
    ],
)
async def test_forged_or_edited_callback_data_is_refused(
    tg_gate: Gate, receiver: Receiver, data: str
) -> None:
    req = await submit(tg_gate)
    if data == "token-made-with-another-secret":
        data = seal("another-secret", "a", req.id)
    click = telegram_click(data.replace("REQ", req.id), 5001)
    reply = await channel(tg_gate).receive(telegram_callback(click), tg_gate)
    assert reply.body == {"result": "refused"}
    assert (await state(tg_gate.store, req.id)).status == "pending"


async def test_a_token_cannot_be_moved_to_another_request(
    tg_gate: Gate, receiver: Receiver
) -> None:
    first, second = await submit(tg_gate), await submit(tg_gate)
    token = seal(TELEGRAM_SECRET, "a", first.id)
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    click = telegram_click(tampered, 5001)
    assert (await channel(tg_gate).receive(telegram_callback(click), tg_gate)).body == {
        "result": "refused"
    }
    assert (await state(tg_gate.store, second.id)).status == "pending"
    assert (await state(tg_gate.store, first.id)).status == "pending"


async def test_reject_asks_for_the_reason_and_the_reply_rejects(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    click = telegram_click(seal(TELEGRAM_SECRET, "r", req.id), 5002)
    tg = channel(tg_gate)
    assert (await tg.receive(telegram_callback(click), tg_gate)).body == {"result": "asked reason"}
    prompt = next(
        p.json()
        for p in receiver.wait_for(f"{BOT}/sendMessage", 3)
        if "force_reply" in json.dumps(p.json())
    )
    assert prompt["reply_markup"]["force_reply"] is True
    assert (await state(tg_gate.store, req.id)).status == "pending"  # nothing yet
    shown = f"Reject {req.id}\nApproval needed: transfer_funds\nReply to this message…"
    reply = telegram_text("wrong account", 5002, reply_to=shown)
    assert (await tg.receive(telegram_callback(reply), tg_gate)).body == {"result": "decided"}
    call = (await state(tg_gate.store, req.id)).calls[0]
    assert (call.resolution, call.resolved_by, call.message) == ("rejected", "bob", "wrong account")


async def test_a_reason_reply_from_someone_else_decides_nothing(
    tg_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(tg_gate)
    shown = f"Reject {req.id}\nApproval needed: transfer_funds"
    reply = telegram_text("go away", 9999, reply_to=shown)
    result = await channel(tg_gate).receive(telegram_callback(reply), tg_gate)
    assert result.body == {"result": "unknown user"}
    assert (await state(tg_gate.store, req.id)).status == "pending"


async def test_start_with_a_persons_link_code_tells_them_the_line_to_add(
    tg_gate: Gate, receiver: Receiver
) -> None:
    tg = channel(tg_gate)
    code = link_code(TELEGRAM_SECRET, "bob")
    newcomer = telegram_text(f"/start {code}", 7777)
    assert (await tg.receive(telegram_callback(newcomer), tg_gate)).body == {"result": "onboarded"}
    known = telegram_text("/start", 5001)
    await tg.receive(telegram_callback(known), tg_gate)
    stranger = telegram_text("/start not-a-code", 8888)
    await tg.receive(telegram_callback(stranger), tg_gate)
    texts = {
        r.json()["chat_id"]: r.json()["text"] for r in receiver.wait_for(f"{BOT}/sendMessage", 3)
    }
    assert "as bob" in texts[7777] and "`telegram: 7777` to bob" in texts[7777]
    assert "linked to signoff as alice" in texts[5001]
    assert "`telegram: 8888`" in texts[8888] and "bob" not in texts[8888]


async def test_a_rate_limited_send_waits_the_retry_after_it_was_given(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    limited = {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 0",
               "parameters": {"retry_after": 0}}  # fmt: skip
    receiver.script(f"{BOT}/sendMessage", answer(429, limited))
    text = policy_text(receiver.url, "", channels=TELEGRAM_ONLY).replace(
        "bob:   {roles: [finance]", "bob:   {roles: []"
    )
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        receiver.wait_for(f"{BOT}/sendMessage", 2)
        await all_sent(gate, req)
        assert gate.delivery is not None
        [row] = await gate.delivery.outbox.outbox_for(req.id)
    assert (row.status, row.attempts) == ("sent", 2)


async def test_a_forbidden_chat_fails_without_retry(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    blocked = {
        "ok": False,
        "error_code": 403,
        "description": "Forbidden: bot was blocked by the user",
    }
    receiver.script(f"{BOT}/sendMessage", answer(403, blocked))
    text = policy_text(receiver.url, "", channels=TELEGRAM_ONLY).replace(
        "bob:   {roles: [finance]", "bob:   {roles: []"
    )
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        assert gate.delivery is not None
        while (await gate.delivery.outbox.outbox_for(req.id))[0].status in ("pending", "sending"):
            await asyncio.sleep(0.02)
        [row] = await gate.delivery.outbox.outbox_for(req.id)
    assert row.status == "failed" and "blocked by the user" in str(row.error)
    assert len(receiver.under(f"{BOT}/sendMessage")) == 1


async def test_a_question_offers_its_choices(tg_gate: Gate, receiver: Receiver) -> None:
    with tg_gate.context("erin", thread="t-q", agent="bot"):
        req = await tg_gate.aask("Deploy now?", choices=["now", "tonight"], wait=False)
    assert not isinstance(req, str)
    post = receiver.wait_for(f"{BOT}/sendMessage")[0]
    tokens = buttons(post)
    assert list(tokens) == ["now", "tonight", "Decline"]
    click = telegram_click(tokens["tonight"], 5002)
    assert (await channel(tg_gate).receive(telegram_callback(click), tg_gate)).body == {
        "result": "decided"
    }
    after = await state(tg_gate.store, req.id)
    assert (after.calls[0].resolution, after.calls[0].message) == ("responded", "tonight")


async def test_link_codes_are_per_person_and_fit_a_start_parameter() -> None:
    codes = {link_code(TELEGRAM_SECRET, p) for p in ("alice", "bob")}
    assert len(codes) == 2
    assert all(telegram.SECRET_TOKEN.fullmatch(c) and len(c) <= 64 for c in codes)


async def test_group_chatter_is_ignored_and_private_text_gets_the_link_hint(
    tg_gate: Gate, receiver: Receiver
) -> None:
    tg = channel(tg_gate)
    chatter = telegram_text("hello all", 7777)
    chatter["message"]["chat"] = {"id": -100, "type": "group"}
    assert (await tg.receive(telegram_callback(chatter), tg_gate)).body == {"result": "ignored"}
    private = telegram_text("hi", 7777)
    assert (await tg.receive(telegram_callback(private), tg_gate)).body == {"result": "onboarded"}
    [hint] = receiver.wait_for(f"{BOT}/sendMessage")
    assert hint.json()["chat_id"] == 7777 and "`telegram: 7777`" in hint.json()["text"]


QUORUM = """
tools:
  transfer_funds:
    default: require_approval
    approvers: {roles: [finance], quorum: 2}
"""


async def test_a_replay_after_the_dedup_window_adds_no_second_approval(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    """Telegram signs no timestamp and update ids are remembered for a window only: a replay
    later gets through to the gate, whose one-decision-per-approver rule makes it a no-op."""
    channels = TELEGRAM_ONLY.replace("{url}", receiver.url)
    text = textwrap.dedent(f"version: 1\n{PEOPLE}{QUORUM}{channels}")
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        update = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 5001)
        tg = channel(gate)
        assert (await tg.receive(telegram_callback(update), gate)).body == {"result": "decided"}
        later = telegram_callback(update)
        replayed = Inbound(later.headers, later.body, time.time() + 3 * tg.replays.window_s)
        assert (await tg.receive(replayed, gate)).body == {"result": "refused"}
        after = await state(gate.store, req.id)
    assert after.status == "pending" and len(after.decisions) == 1  # bob's approval still needed


async def test_answers_from_a_callback_share_one_verifying_tls_context() -> None:
    import ssl

    from signoff.channels._http import tls

    assert tls() is tls()  # built once: loading the CA bundle costs ~30 ms of CPU
    assert tls().verify_mode == ssl.CERT_REQUIRED and tls().check_hostname
