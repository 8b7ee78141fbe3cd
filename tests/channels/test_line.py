"""LINE Messaging API: confirm-template pushes with a stable retry key (409 = delivered),
verified postbacks, onboarding replies, outcome follow-ups."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

import pytest

from signoff import Gate, Policy
from signoff.channels.line import LineChannel
from signoff.store import MemoryStore
from tests.channels.conftest import line_callback, line_postback, policy_text, state, submit
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

LINE_ONLY = """
channels:
  line: {channel_access_token: "${T_LINE_TOKEN}", channel_secret: "${T_LINE_SECRET}",
         api_url: "{url}/line"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


@pytest.fixture
async def line_gate(receiver: Receiver, secrets: dict[str, str]) -> Any:
    gate = Gate(Policy.from_yaml(policy_text(receiver.url, "", channels=LINE_ONLY)), MemoryStore())
    await gate.astart()
    yield gate
    await gate.aclose()


def line(gate: Gate) -> LineChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["line"]
    assert isinstance(found, LineChannel)
    return found


async def test_each_approver_gets_a_confirm_template_push(
    line_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(line_gate)
    pushes = receiver.wait_for("/line/v2/bot/message/push", 2)
    assert sorted(p.json()["to"] for p in pushes) == ["Ualice", "Ubob"]
    push = pushes[0]
    assert push.headers["authorization"] == "Bearer line-access-token"
    assert len(push.headers["x-line-retry-key"]) == 36
    template = push.json()["messages"][0]["template"]
    assert template["type"] == "confirm" and len(template["text"]) <= 240
    data = [parse_qs(a["data"]) for a in template["actions"]]
    assert data == [{"a": ["approve"], "r": [req.id]}, {"a": ["reject"], "r": [req.id]}]


async def test_a_retried_push_reuses_its_retry_key_and_409_counts_as_delivered(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script("/line/v2/bot/message/push", answer(500), answer(409, {"message": "accepted"}))
    text = policy_text(receiver.url, "", channels=LINE_ONLY).replace(
        "bob:   {roles: [finance]", "bob:   {roles: []"
    )
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        pushes = receiver.wait_for("/line/v2/bot/message/push", 2)
        assert gate.delivery is not None
        while (await gate.delivery.outbox.outbox_for(req.id))[0].status != "sent":
            await asyncio.sleep(0.02)
        [row] = await gate.delivery.outbox.outbox_for(req.id)
    assert len({p.headers["x-line-retry-key"] for p in pushes}) == 1
    assert (row.status, row.attempts) == ("sent", 2)


async def test_a_reject_postback_rejects_and_is_answered_by_reply(
    line_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(line_gate)
    event = line_postback(f"a=reject&r={req.id}", "Ualice")
    reply = await line(line_gate).receive(line_callback([event]), line_gate)
    assert reply.body == {"results": ["decided"]}
    [answered] = receiver.wait_for("/line/v2/bot/message/reply")
    assert answered.json()["replyToken"] == event["replyToken"]
    assert "Rejected by alice" in answered.json()["messages"][0]["text"]
    assert (await state(line_gate.store, req.id)).calls[0].resolution == "rejected"


async def test_following_the_account_tells_a_new_user_their_id(
    line_gate: Gate, receiver: Receiver
) -> None:
    follow = {**line_postback("", "Unewcomer"), "type": "follow"}
    known = {**line_postback("", "Ubob"), "type": "message", "message": {"text": "hi"}}
    reply = await line(line_gate).receive(line_callback([follow, known]), line_gate)
    assert reply.body == {"results": ["onboarded", "onboarded"]}
    texts = [
        r.json()["messages"][0]["text"] for r in receiver.wait_for("/line/v2/bot/message/reply", 2)
    ]
    assert any("line: Unewcomer" in t for t in texts)
    assert any("linked to signoff as bob" in t for t in texts)


async def test_other_approvers_get_the_outcome_as_a_follow_up(
    line_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(line_gate)
    receiver.wait_for("/line/v2/bot/message/push", 2)
    assert line_gate.delivery is not None
    while any(r.status != "sent" for r in await line_gate.delivery.outbox.outbox_for(req.id)):
        await asyncio.sleep(0.02)
    event = line_postback(f"a=approve&r={req.id}", "Ualice")
    await line(line_gate).receive(line_callback([event]), line_gate)
    [follow_up] = receiver.wait_for("/line/v2/bot/message/push", 3)[2:]
    assert follow_up.json()["to"] == "Ubob"  # alice got the outcome as her reply
    assert "Approved by alice" in follow_up.json()["messages"][0]["text"]


async def test_a_question_offers_its_choices_and_a_tap_answers_it(
    line_gate: Gate, receiver: Receiver
) -> None:
    with line_gate.context("erin", thread="t-q", agent="bot"):
        req = await line_gate.aask("Deploy now?", choices=["now", "tonight"], wait=False)
    assert not isinstance(req, str)
    push = receiver.wait_for("/line/v2/bot/message/push")[0].json()
    template = push["messages"][0]["template"]
    assert template["type"] == "buttons"
    assert [a["label"] for a in template["actions"]] == ["now", "tonight", "Decline"]
    event = line_postback(f"a=respond&r={req.id}&c=1", "Ubob")
    reply = await line(line_gate).receive(line_callback([event]), line_gate)
    assert reply.body == {"results": ["decided"]}
    after = await state(line_gate.store, req.id)
    assert (after.calls[0].resolution, after.calls[0].message) == ("responded", "tonight")
