"""DingTalk: interactive cards delivered to each approver's robot chat, callbacks
authenticated by signoff's own per-card HMAC token, outcome updates on every copy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels.dingtalk import DingTalkChannel, token
from signoff.model import ApprovalRequest
from signoff.store import MemoryStore
from tests.channels.conftest import DINGTALK_SECRET, policy_text, state, submit
from tests.channels.platforms import dingtalk_callback
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

DINGTALK_ONLY = """
channels:
  dingtalk: {app_key: dingapp, app_secret: "${T_DINGTALK_SECRET}", robot_code: dingrobot,
             card_template_id: tpl.schema, callback_route_key: signoff-route,
             api_url: "{url}/dingtalk"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""
DELIVER = "/dingtalk/v1.0/card/instances/createAndDeliver"


@pytest.fixture
async def dt_gate(receiver: Receiver, secrets: dict[str, str]) -> Any:
    text = policy_text(receiver.url, "", channels=DINGTALK_ONLY)
    gate = Gate(Policy.from_yaml(text), MemoryStore())
    await gate.astart()
    yield gate
    await gate.aclose()


def channel(gate: Gate) -> DingTalkChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["dingtalk"]
    assert isinstance(found, DingTalkChannel)
    return found


async def cards(gate: Gate, receiver: Receiver, req: ApprovalRequest) -> dict[str, Any]:
    """The delivered card of each recipient (by userId), once all are sent."""
    receiver.wait_for(DELIVER, 2)
    assert gate.delivery is not None
    while any(r.status != "sent" for r in await gate.delivery.outbox.outbox_for(req.id)):
        await asyncio.sleep(0.02)
    posts = [p.json() for p in receiver.under(DELIVER)]
    mine = [p for p in posts if p["cardData"]["cardParamMap"]["request_id"] == req.id]
    return {p["openSpaceId"].rsplit(".", 1)[1]: p for p in mine}


def click(card: dict[str, Any], user: str, action: str, **override: str) -> Any:
    params = card["cardData"]["cardParamMap"]
    sent = {
        "action": action,
        "request_id": params["request_id"],
        "token": params[f"{action}_token"],
    }
    return dingtalk_callback(card["outTrackId"], user, {**sent, **override})


async def test_each_approver_gets_a_card_in_the_robot_chat(
    dt_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(dt_gate)
    sent = await cards(dt_gate, receiver, req)
    assert sorted(sent) == ["0501", "0502"]
    [fetched] = receiver.under("/dingtalk/v1.0/oauth2/accessToken")
    assert fetched.json() == {"appKey": "dingapp", "appSecret": DINGTALK_SECRET}
    card = sent["0501"]
    assert receiver.under(DELIVER)[0].headers["x-acs-dingtalk-access-token"] == "dt-token"
    assert (card["cardTemplateId"], card["callbackType"], card["callbackRouteKey"]) == (
        "tpl.schema",
        "HTTP",
        "signoff-route",
    )
    assert card["imRobotOpenDeliverModel"] == {"spaceType": "IM_ROBOT", "robotCode": "dingrobot"}
    assert card["imRobotOpenSpaceModel"] == {"supportForward": False}
    params = card["cardData"]["cardParamMap"]
    assert all(isinstance(v, str) for v in params.values())
    assert (params["request_id"], params["status"], params["can_approve"]) == (
        req.id,
        "pending",
        "true",
    )
    expected = token(DINGTALK_SECRET, card["outTrackId"], "0501", "approve", req.id)
    assert params["approve_token"] == expected


async def test_a_tokened_click_decides_and_every_copy_shows_the_outcome(
    dt_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(dt_gate)
    sent = await cards(dt_gate, receiver, req)
    reply = await channel(dt_gate).receive(click(sent["0501"], "0501", "approve"), dt_gate)
    assert reply.status == 200
    shown = reply.body["cardData"]["cardParamMap"]
    assert shown["status"] == "resolved" and "Approved by alice" in shown["outcome"]
    updates = receiver.wait_for("/dingtalk/v1.0/card/instances", 4)
    puts = [u.json() for u in updates if u.method == "PUT"]
    assert {p["outTrackId"] for p in puts} == {c["outTrackId"] for c in sent.values()}
    assert all(p["cardData"]["cardParamMap"]["can_approve"] == "false" for p in puts)
    after = await state(dt_gate.store, req.id)
    assert (after.status, after.decisions[0].channel) == ("resolved", "dingtalk")


@pytest.mark.parametrize(
    "forge",
    [
        "no token",
        "guessed token",
        "another user's token",  # bob's card's token, sent as alice
        "token of the other action",
        "another request",
        "another card",
    ],
)
async def test_forged_clicks_are_refused_and_decide_nothing(
    dt_gate: Gate, receiver: Receiver, forge: str
) -> None:
    req = await submit(dt_gate)
    other = await submit(dt_gate)
    sent = await cards(dt_gate, receiver, req)
    alice, bob = sent["0501"], sent["0502"]
    inbound = {
        "no token": lambda: click(alice, "0501", "approve", token=""),
        "guessed token": lambda: click(alice, "0501", "approve", token="0" * 64),
        "another user's token": lambda: click(bob, "0501", "approve"),
        "token of the other action": lambda: click(
            alice, "0501", "approve", token=alice["cardData"]["cardParamMap"]["reject_token"]
        ),
        "another request": lambda: click(alice, "0501", "approve", request_id=other.id),
        "another card": lambda: dingtalk_callback(
            bob["outTrackId"],
            "0501",
            {
                "action": "approve",
                "request_id": req.id,
                "token": alice["cardData"]["cardParamMap"]["approve_token"],
            },
        ),
    }[forge]()
    reply = await channel(dt_gate).receive(inbound, dt_gate)
    assert reply.status == 401
    assert (await state(dt_gate.store, req.id)).status == "pending"
    assert (await state(dt_gate.store, other.id)).status == "pending"


async def test_a_replayed_click_is_refused(dt_gate: Gate, receiver: Receiver) -> None:
    req = await submit(dt_gate)
    sent = await cards(dt_gate, receiver, req)
    dt = channel(dt_gate)
    first = click(sent["0502"], "0502", "reject")
    assert (await dt.receive(first, dt_gate)).status == 200
    again = await dt.receive(click(sent["0502"], "0502", "reject"), dt_gate)
    assert again.status == 409
    assert len((await state(dt_gate.store, req.id)).decisions) == 1


async def test_a_user_no_longer_in_people_is_refused(dt_gate: Gate, receiver: Receiver) -> None:
    req = await submit(dt_gate)
    # A card once sent to a userId that people: no longer lists: its token is genuine.
    params = {
        "action": "approve",
        "request_id": req.id,
        "token": token(DINGTALK_SECRET, "ob_old", "0999", "approve", req.id),
    }
    reply = await channel(dt_gate).receive(dingtalk_callback("ob_old", "0999", params), dt_gate)
    assert reply.status == 200
    assert 'dingtalk: "0999"' in reply.body["cardData"]["cardParamMap"]["notice"]
    assert (await state(dt_gate.store, req.id)).status == "pending"


async def test_a_malformed_callback_is_a_400(dt_gate: Gate) -> None:
    from signoff.channels import Inbound

    dt = channel(dt_gate)
    for body in (b"not json", b"{}", b'{"value": "{\\"cardPrivateData\\": 1}"}'):
        assert (await dt.receive(Inbound({}, body, 0.0), dt_gate)).status == 400


async def test_a_failed_delivery_result_is_final(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    failed = {"success": True, "result": {"deliverResults": [{"success": False,
              "errorMsg": "robot not in chat"}]}}  # fmt: skip
    receiver.script(DELIVER, answer(200, failed))
    text = policy_text(receiver.url, "", channels=DINGTALK_ONLY).replace(
        "bob:   {roles: [finance]", "bob:   {roles: []"
    )
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        assert gate.delivery is not None
        while (await gate.delivery.outbox.outbox_for(req.id))[0].status in ("pending", "sending"):
            await asyncio.sleep(0.02)
        [row] = await gate.delivery.outbox.outbox_for(req.id)
    assert row.status == "failed" and "robot not in chat" in str(row.error)


async def test_a_person_without_the_role_may_not_decide(dt_gate: Gate, receiver: Receiver) -> None:
    req = await submit(dt_gate)  # transfer_funds: finance; dave is ops
    # A genuine token (as on a card once sent to dave): the role check still refuses it.
    params = {
        "action": "approve",
        "request_id": req.id,
        "token": token(DINGTALK_SECRET, "ob_dave", "0504", "approve", req.id),
    }
    reply = await channel(dt_gate).receive(dingtalk_callback("ob_dave", "0504", params), dt_gate)
    assert reply.status == 200
    shown = reply.body["cardData"]["cardParamMap"]
    assert "status" not in shown and shown["notice"]  # a notice, not an outcome
    assert (await state(dt_gate.store, req.id)).status == "pending"
