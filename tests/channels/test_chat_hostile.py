"""Hostile agent text end to end on Telegram and Feishu: what a real gate sends to the
platform (prompt, Telegram's force-reply reason prompt, Feishu's patched and returned outcome
cards) carries no markup, mention, escape code or bidi control of the agent's."""

from __future__ import annotations

import asyncio
import html
import json
import re
from typing import Any

from signoff import Gate, Policy
from signoff.channels.telegram import seal
from signoff.model import ApprovalRequest, ToolCall
from signoff.store import MemoryStore
from tests.channels.conftest import TELEGRAM_SECRET, TELEGRAM_TOKEN, policy_text
from tests.channels.platforms import (
    feishu_callback,
    feishu_click,
    telegram_callback,
    telegram_click,
)
from tests.channels.receiver import Receiver
from tests.model.inert_helpers import hidden_chars

HOSTILE = (
    '<at user_id="all"></at><at id=all></at> <b>bold</b> <a href="https://evil.example">x</a> '
    "**now** [ok](https://evil.example) <font color='red'>red</font> @everyone /start "
    "\u202egnp.exe \x1b[31mred\x1b[0m"
)

CHANNELS = """
channels:
  telegram: {bot_token: "${T_TELEGRAM_TOKEN}", webhook_secret: "${T_TELEGRAM_SECRET}",
             api_url: "{url}/telegram"}
  feishu: {app_id: cli_test, app_secret: "${T_FEISHU_SECRET}",
           verification_token: "${T_FEISHU_VERIFY}", encrypt_key: "${T_FEISHU_ENCRYPT}",
           api_url: "{url}/feishu"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""
BOT = f"/telegram/bot{TELEGRAM_TOKEN}"
MESSAGES = "/feishu/open-apis/im/v1/messages"


async def hostile_gate(receiver: Receiver) -> Gate:
    gate = Gate(Policy.from_yaml(policy_text(receiver.url, "", channels=CHANNELS)), MemoryStore())
    await gate.astart()
    return gate


async def hostile_call(gate: Gate) -> ApprovalRequest:
    ctx = gate.make_context("erin", thread=f"t {HOSTILE}", agent=f"bot {HOSTILE}")
    call = ToolCall("transfer_funds", {"amount": 5, "to": HOSTILE}, id="c1")
    sub = await gate.asubmit([call], ctx)
    assert sub.request is not None
    return sub.request


async def all_sent(gate: Gate, req: ApprovalRequest) -> None:
    assert gate.delivery is not None
    while any(r.status != "sent" for r in await gate.delivery.outbox.outbox_for(req.id)):
        await asyncio.sleep(0.02)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def telegram_html_is_ours(body: dict[str, Any]) -> None:
    """Markup parsed by Telegram is only signoff's own ``<pre>`` / ``<code>``."""
    text = body["text"]
    if body.get("parse_mode") == "HTML":
        assert set(re.findall(r"<[^>]*>", text)) <= {"<pre>", "</pre>", "<code>", "</code>"}
    else:
        assert "parse_mode" not in body  # plain text: nothing is parsed
    assert hidden_chars(text, newlines_allowed=True) == []


async def test_telegram_prompt_and_reason_prompt_carry_no_agent_markup(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    gate = await hostile_gate(receiver)
    try:
        with gate.context("erin", thread="t-hostile", agent=f"bot {HOSTILE}"):
            question = await gate.aask(f"Pay? {HOSTILE}", choices=[HOSTILE, "no"], wait=False)
        assert not isinstance(question, str)
        telegram = gate.delivery.messengers["telegram"] if gate.delivery else None
        assert telegram is not None
        decline = telegram_click(seal(TELEGRAM_SECRET, "r", question.id), 5002)
        answer = await telegram.receive(telegram_callback(decline), gate)  # type: ignore[attr-defined]
        assert answer.body == {"result": "asked reason"}
        sent = [p.json() for p in receiver.wait_for(f"{BOT}/sendMessage", 3)]
    finally:
        await gate.aclose()
    for body in sent:
        telegram_html_is_ours(body)
        for row in (body.get("reply_markup") or {}).get("inline_keyboard", []):
            for button in row:  # button labels are plain text; callback data is our token
                assert hidden_chars(button["text"], newlines_allowed=False) == []
    reason = next(b for b in sent if "force_reply" in json.dumps(b))
    assert "Question from bot &lt;at user_id=" in reason["text"]
    prompt = next(b for b in sent if "inline_keyboard" in json.dumps(b))
    assert '&lt;a href="https://evil.example"&gt;' in prompt["text"]


async def test_feishu_cards_sent_patched_and_returned_carry_no_agent_markup(
    receiver: Receiver, secrets: dict[str, str]
) -> None:
    gate = await hostile_gate(receiver)
    try:
        req = await hostile_call(gate)
        receiver.wait_for(MESSAGES, 2)
        await all_sent(gate, req)
        feishu = gate.delivery.messengers["feishu"] if gate.delivery else None
        assert feishu is not None
        click = feishu_click({"a": "approve", "r": req.id}, "ou_alice")
        reply = await feishu.receive(feishu_callback(click), gate)  # type: ignore[attr-defined]
        assert reply.body["toast"]["type"] == "success"
        posts = receiver.wait_for(MESSAGES, 4)  # 2 sent, 2 patched to the outcome
    finally:
        await gate.aclose()
    cards = [json.loads(p.json()["content"]) for p in posts] + [reply.body["card"]["data"]]
    assert len(cards) == 5
    for card in cards:
        texts = [node for node in _nodes(card) if "content" in node and "tag" in node]
        assert {t["tag"] for t in texts} <= {"plain_text", "lark_md"}
        for t in texts:
            assert hidden_chars(t["content"], newlines_allowed=True) == []
            if t["tag"] == "lark_md":
                bare = re.sub(r"&#\d+;", "", t["content"])
                assert not set(bare) & set("<>*[]()`@&")
        shown = html.unescape(" ".join(t["content"] for t in texts))
        assert "<at user_id=" in shown  # shown literally, never as a mention
    assert "ou_alice" not in json.dumps(cards)


def _nodes(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value] + [n for v in value.values() for n in _nodes(v)]
    if isinstance(value, list):
        return [n for v in value for n in _nodes(v)]
    return []
