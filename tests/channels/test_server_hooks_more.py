"""``POST /hooks/telegram``, ``/hooks/feishu`` and ``/hooks/dingtalk`` on a real server
(uvicorn on loopback): a genuine callback decides, a forged one is a 401 and changes
nothing, and the messages link to the request's page."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from signoff import Gate, Policy
from signoff.channels.telegram import seal
from signoff.server import ServerThread, create_app
from signoff.store import MemoryStore
from tests.channels.conftest import TELEGRAM_SECRET, TELEGRAM_TOKEN, policy_text, submit
from tests.channels.platforms import (
    dingtalk_callback,
    feishu_callback,
    feishu_click,
    telegram_callback,
    telegram_click,
)
from tests.channels.receiver import Receiver
from tests.channels.test_server_hooks import Running

CHANNELS = """
channels:
  telegram: {bot_token: "${T_TELEGRAM_TOKEN}", webhook_secret: "${T_TELEGRAM_SECRET}",
             api_url: "{url}/telegram"}
  feishu: {app_id: cli_test, app_secret: "${T_FEISHU_SECRET}",
           verification_token: "${T_FEISHU_VERIFY}", encrypt_key: "${T_FEISHU_ENCRYPT}",
           api_url: "{url}/feishu"}
  dingtalk: {app_key: dingapp, app_secret: "${T_DINGTALK_SECRET}", robot_code: dingrobot,
             card_template_id: tpl.schema, callback_route_key: signoff-route,
             api_url: "{url}/dingtalk"}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


@pytest.fixture
def running(receiver: Receiver, secrets: dict[str, str]) -> Iterator[Running]:
    gate = Gate(Policy.from_yaml(policy_text(receiver.url, "", channels=CHANNELS)), MemoryStore())
    thread = ServerThread(create_app(gate, owns_gate=True))
    thread.start()
    yield Running(gate, thread)
    thread.stop()


def test_telegram_callbacks_at_hooks_telegram(running: Running, receiver: Receiver) -> None:
    req = running.run(submit(running.gate))
    [post, *_] = receiver.wait_for(f"/telegram/bot{TELEGRAM_TOKEN}/sendMessage", 2)
    rows = post.json()["reply_markup"]["inline_keyboard"]
    assert rows[-1] == [{"text": "Open", "url": f"{running.url}/requests/{req.id}"}]
    click = telegram_click(seal(TELEGRAM_SECRET, "a", req.id), 5001)
    forged = running.post("/hooks/telegram", telegram_callback(click, secret="guessed"))
    assert forged.status_code == 401
    assert running.run(running.gate.get(req.id)).status == "pending"
    good = running.post("/hooks/telegram", telegram_callback(click))
    assert (good.status_code, good.json()) == (200, {"result": "decided"})
    assert running.run(running.gate.get(req.id)).status == "resolved"


def test_feishu_callbacks_at_hooks_feishu(running: Running) -> None:
    check = {"challenge": "c-1", "token": "feishu-verification-token", "type": "url_verification"}
    answered = running.post("/hooks/feishu", feishu_callback(check, signed=False))
    assert (answered.status_code, answered.json()) == (200, {"challenge": "c-1"})
    req = running.run(submit(running.gate))
    click = feishu_click({"a": "reject", "r": req.id}, "ou_bob")
    forged = running.post("/hooks/feishu", feishu_callback(click, sign_key="guessed"))
    assert forged.status_code == 401
    good = running.post("/hooks/feishu", feishu_callback(click))
    assert good.status_code == 200 and good.json()["toast"]["type"] == "success"
    assert running.run(running.gate.get(req.id)).calls[0].resolution == "rejected"


def test_dingtalk_callbacks_at_hooks_dingtalk(running: Running, receiver: Receiver) -> None:
    req = running.run(submit(running.gate))
    posts = receiver.wait_for("/dingtalk/v1.0/card/instances/createAndDeliver", 2)
    card = next(p.json() for p in posts if p.json()["openSpaceId"].endswith(".0501"))
    params = card["cardData"]["cardParamMap"]
    assert params["page_url"] == f"{running.url}/requests/{req.id}"
    sent = {"action": "approve", "request_id": req.id, "token": params["approve_token"]}
    forged = dingtalk_callback(card["outTrackId"], "0502", sent)  # alice's token, as bob
    assert running.post("/hooks/dingtalk", forged).status_code == 401
    good = running.post("/hooks/dingtalk", dingtalk_callback(card["outTrackId"], "0501", sent))
    assert good.status_code == 200
    assert json.loads(good.text)["cardData"]["cardParamMap"]["status"] == "resolved"
    assert running.run(running.gate.get(req.id)).status == "resolved"
