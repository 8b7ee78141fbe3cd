"""Feishu / Lark: interactive cards under a cached tenant_access_token, callbacks that are
encrypted and signed (X-Lark-Signature), the url_verification challenge, outcome patches."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels.config import parse
from signoff.channels.feishu import FeishuChannel, decrypt
from signoff.model import ApprovalRequest, PolicyError
from signoff.store import MemoryStore
from tests.channels.conftest import FEISHU_ENCRYPT_KEY, policy_text, state, submit
from tests.channels.platforms import feishu_callback, feishu_click, feishu_encrypt
from tests.channels.receiver import Receiver, answer

pytestmark = pytest.mark.asyncio

FEISHU_ONLY = """
channels:
  feishu: {app_id: cli_test, app_secret: "${T_FEISHU_SECRET}",
           verification_token: "${T_FEISHU_VERIFY}", encrypt_key: "${T_FEISHU_ENCRYPT}",
           domain: lark, api_url: "{url}/feishu"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""
MESSAGES = "/feishu/open-apis/im/v1/messages"


@pytest.fixture
async def fs_gate(receiver: Receiver, secrets: dict[str, str]) -> Any:
    gate = Gate(
        Policy.from_yaml(policy_text(receiver.url, "", channels=FEISHU_ONLY)), MemoryStore()
    )
    await gate.astart()
    yield gate
    await gate.aclose()


def channel(gate: Gate) -> FeishuChannel:
    assert gate.delivery is not None
    found = gate.delivery.messengers["feishu"]
    assert isinstance(found, FeishuChannel)
    return found


async def all_sent(gate: Gate, req: ApprovalRequest) -> None:
    assert gate.delivery is not None
    while any(r.status != "sent" for r in await gate.delivery.outbox.outbox_for(req.id)):
        await asyncio.sleep(0.02)


async def test_each_approver_gets_a_card_sent_once_per_uuid_under_one_token(
    fs_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(fs_gate)
    posts = receiver.wait_for(MESSAGES, 2)
    [token] = receiver.under("/feishu/open-apis/auth/v3/tenant_access_token/internal")
    assert token.json() == {"app_id": "cli_test", "app_secret": "feishu-app-secret"}
    assert sorted(p.json()["receive_id"] for p in posts) == ["ou_alice", "ou_bob"]
    post = posts[0]
    assert post.query == "receive_id_type=open_id"
    assert post.headers["authorization"] == "Bearer t-feishu"
    body = post.json()
    assert body["msg_type"] == "interactive" and body["uuid"].startswith("ob_")
    card = json.loads(body["content"])
    assert card["config"]["update_multi"] is True
    assert card["header"]["title"]["content"] == "Approval needed: transfer_funds"
    [actions] = [e["actions"] for e in card["elements"] if e["tag"] == "action"]
    assert [a["value"] for a in actions] == [
        {"a": "approve", "r": req.id},
        {"a": "reject", "r": req.id},
    ]


async def test_a_signed_encrypted_click_decides_and_answers_with_the_outcome_card(
    fs_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(fs_gate)
    receiver.wait_for(MESSAGES, 2)
    await all_sent(fs_gate, req)
    click = feishu_click({"a": "approve", "r": req.id}, "ou_alice")
    reply = await channel(fs_gate).receive(feishu_callback(click), fs_gate)
    assert reply.status == 200
    assert reply.body["toast"]["type"] == "success"
    assert "Approved by alice" in reply.body["toast"]["content"]
    assert reply.body["card"]["type"] == "raw"
    patches = [r for r in receiver.wait_for(MESSAGES, 4) if r.method == "PATCH"]
    assert len(patches) == 2  # every copy, the clicker's too
    note = json.loads(patches[0].json()["content"])["elements"][-1]["elements"][0]
    assert "Approved by alice" in note["content"]
    after = await state(fs_gate.store, req.id)
    assert (after.status, after.decisions[0].channel) == ("resolved", "feishu")


async def test_the_url_check_is_answered_only_with_the_key_and_the_token(
    fs_gate: Gate, receiver: Receiver
) -> None:
    fs = channel(fs_gate)
    check = {"challenge": "c-123", "token": "feishu-verification-token", "type": "url_verification"}
    good = await fs.receive(feishu_callback(check, signed=False), fs_gate)
    assert (good.status, good.body) == (200, {"challenge": "c-123"})
    wrong_token = {**check, "token": "guessed"}
    assert (await fs.receive(feishu_callback(wrong_token, signed=False), fs_gate)).status == 401
    wrong_key = feishu_callback(check, key="another-key", signed=False)
    assert (await fs.receive(wrong_key, fs_gate)).status == 401


@pytest.mark.parametrize(
    "forge",
    ["wrong signing key", "stale", "future", "unsigned", "plaintext", "wrong token", "tampered"],
)
async def test_forged_callbacks_are_refused_and_decide_nothing(
    fs_gate: Gate, receiver: Receiver, forge: str
) -> None:
    req = await submit(fs_gate)
    click = feishu_click({"a": "approve", "r": req.id}, "ou_alice")
    inbound = feishu_callback(click)
    if forge == "wrong signing key":
        inbound = feishu_callback(click, sign_key="guessed")
    elif forge == "stale":
        inbound = feishu_callback(click, ts=inbound.now - 301)
    elif forge == "future":
        inbound = feishu_callback(click, ts=inbound.now + 301)
    elif forge == "unsigned":
        inbound = feishu_callback(click, signed=False)
    elif forge == "plaintext":
        signed = feishu_callback({"encrypt": "x"})
        inbound = type(signed)(signed.headers, json.dumps(click).encode(), signed.now)
    elif forge == "wrong token":
        inbound = feishu_callback(
            feishu_click({"a": "approve", "r": req.id}, "ou_alice", token="x")
        )
    elif forge == "tampered":
        other = json.dumps({"encrypt": feishu_encrypt(json.dumps(click).encode())}).encode()
        inbound = type(inbound)(inbound.headers, other, inbound.now)
    reply = await channel(fs_gate).receive(inbound, fs_gate)
    assert reply.status == 401
    assert (await state(fs_gate.store, req.id)).status == "pending"


async def test_a_replayed_event_id_is_answered_but_not_acted_on(
    fs_gate: Gate, receiver: Receiver
) -> None:
    req = await submit(fs_gate)
    click = feishu_click({"a": "reject", "r": req.id}, "ou_bob")
    fs = channel(fs_gate)
    assert (await fs.receive(feishu_callback(click), fs_gate)).body["toast"]["type"] == "success"
    again = await fs.receive(feishu_callback(click), fs_gate)  # re-signed, same event_id
    assert again.body == {"toast": {"type": "info", "content": "This click was already processed."}}
    assert len((await state(fs_gate.store, req.id)).decisions) == 1


async def test_an_unknown_open_id_is_refused_by_toast(fs_gate: Gate, receiver: Receiver) -> None:
    req = await submit(fs_gate)
    click = feishu_click({"a": "approve", "r": req.id}, "ou_mallory")
    reply = await channel(fs_gate).receive(feishu_callback(click), fs_gate)
    assert reply.body["toast"]["type"] == "error"
    assert "feishu: ou_mallory" in reply.body["toast"]["content"]
    assert "card" not in reply.body
    assert (await state(fs_gate.store, req.id)).status == "pending"


async def test_a_refused_token_is_fetched_again(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    receiver.script(MESSAGES, answer(400, {"code": 99991663, "msg": "Invalid access token"}))
    text = policy_text(receiver.url, "", channels=FEISHU_ONLY).replace(
        "bob:   {roles: [finance]", "bob:   {roles: []"
    )
    async with Gate(Policy.from_yaml(text), MemoryStore()) as gate:
        req = await submit(gate)
        receiver.wait_for(MESSAGES, 2)
        await all_sent(gate, req)
    assert len(receiver.under("/feishu/open-apis/auth/v3/tenant_access_token/internal")) == 2


async def test_decrypt_reads_what_feishu_encrypts() -> None:
    assert decrypt(FEISHU_ENCRYPT_KEY, feishu_encrypt(b'{"a": 1}')) == b'{"a": 1}'


FEISHU = {"app_id": "x", "app_secret": "${A}", "verification_token": "${B}", "encrypt_key": "${C}"}


@pytest.mark.parametrize("missing", ["encrypt_key", "verification_token"])
async def test_the_encrypt_key_and_verification_token_are_required(missing: str) -> None:
    section = {k: v for k, v in FEISHU.items() if k != missing}
    with pytest.raises(PolicyError) as err:
        parse({"feishu": section})
    assert f"channels.feishu.{missing}" in str(err.value)


async def test_an_inline_app_secret_and_an_unknown_domain_are_refused() -> None:
    with pytest.raises(PolicyError, match=r"channels\.feishu\.app_secret"):
        parse({"feishu": {**FEISHU, "app_secret": "s3cret"}})
    with pytest.raises(PolicyError, match=r"channels\.feishu\.domain"):
        parse({"feishu": {**FEISHU, "domain": "larksuite"}})


async def test_a_person_without_the_role_may_not_decide(fs_gate: Gate, receiver: Receiver) -> None:
    req = await submit(fs_gate)  # transfer_funds: finance; dave is ops
    click = feishu_click({"a": "approve", "r": req.id}, "ou_dave")
    reply = await channel(fs_gate).receive(feishu_callback(click), fs_gate)
    assert reply.body["toast"]["type"] == "error" and "card" not in reply.body
    assert (await state(fs_gate.store, req.id)).status == "pending"
