"""Telegram, Feishu and DingTalk by name in a rule's ``notify:``, and ``domain: lark``: a rule
reaches only the channels it names, each approver on each of their addresses there."""

from __future__ import annotations

import pytest

from signoff import Gate, Policy
from signoff.channels.config import parse
from signoff.model import PolicyError
from signoff.store import MemoryStore
from tests.channels.conftest import PEOPLE, submit
from tests.channels.receiver import Receiver

POLICY = """
version: 1
{people}
tools:
  transfer_funds:
    default: require_approval
    approvers: {{roles: [finance]}}
    notify: [telegram]
  deploy:
    default: require_approval
    approvers: {{roles: [ops]}}
    notify: [feishu, dingtalk]
channels:
  telegram: {{bot_token: "${{T_TELEGRAM_TOKEN}}", webhook_secret: "${{T_TELEGRAM_SECRET}}",
             api_url: "{url}/telegram"}}
  feishu: {{app_id: cli_test, app_secret: "${{T_FEISHU_SECRET}}",
           verification_token: "${{T_FEISHU_VERIFY}}", encrypt_key: "${{T_FEISHU_ENCRYPT}}",
           api_url: "{url}/feishu"}}
  dingtalk: {{app_key: dingapp, app_secret: "${{T_DINGTALK_SECRET}}", robot_code: r,
             card_template_id: t, callback_route_key: k, api_url: "{url}/dingtalk"}}
  delivery: {{poll: 60}}
"""


async def outbox_rows(
    receiver: Receiver, tool: str, secrets: dict[str, str]
) -> set[tuple[str, str]]:
    """(channel, recipient address) of every prompt the request's creation queued."""
    text = POLICY.format(people=PEOPLE, url=receiver.url)
    gate = Gate(Policy.from_yaml(text), MemoryStore())
    try:
        req = await submit(gate, tool)
        assert gate.delivery is not None
        rows = await gate.delivery.outbox.outbox_for(req.id)
    finally:
        await gate.aclose()
    return {(r.channel, r.recipient) for r in rows if r.kind == "prompt"}


async def test_notify_telegram_reaches_only_telegram(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    rows = await outbox_rows(receiver, "transfer_funds", secrets)
    assert rows == {("telegram", "5001"), ("telegram", "5002")}  # alice and bob (finance)


async def test_notify_feishu_and_dingtalk_reach_both_and_nothing_else(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    rows = await outbox_rows(receiver, "deploy", secrets)
    assert rows == {("feishu", "ou_dave"), ("dingtalk", "0504")}  # dave (ops)


def test_a_misspelt_notify_name_is_refused_naming_the_chat_channels(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    text = POLICY.format(people=PEOPLE, url=receiver.url).replace(
        "notify: [telegram]", "notify: [telegarm]"
    )
    with pytest.raises(PolicyError, match=r"telegarm.*'telegram', 'feishu', 'dingtalk'"):
        Policy.from_yaml(text)


def test_domain_lark_talks_to_larksuite_and_feishu_is_the_default() -> None:
    base = {
        "app_id": "cli_a",
        "app_secret": "${S}",
        "verification_token": "${V}",
        "encrypt_key": "${K}",
    }
    assert parse({"feishu": base}).feishu.base_url == "https://open.feishu.cn"  # type: ignore[union-attr]
    lark = parse({"feishu": {**base, "domain": "lark"}}).feishu
    assert lark is not None and lark.base_url == "https://open.larksuite.com"
