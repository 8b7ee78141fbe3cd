"""The inbound endpoints on a real server (uvicorn on loopback): ``POST /hooks/slack``,
``/hooks/discord``, ``/hooks/webhook``; a channel that is not configured answers 404; and
an email's personal one-click link, which a scanner's GET cannot use, decides on POST."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signoff import Gate, Policy
from signoff.channels import Inbound
from signoff.server import ServerThread, create_app
from signoff.store import MemoryStore
from tests.channels.conftest import (
    discord_callback,
    policy_text,
    public_hex,
    slack_callback,
    slack_click,
    submit,
    webhook_callback,
)
from tests.channels.receiver import Receiver
from tests.channels.smtp import PASSWORD, USER, SMTPServer, body_text

pytestmark = pytest.mark.filterwarnings("ignore:.*login_data.*:DeprecationWarning")

CHANNELS = """
channels:
  slack: {bot_token: "${T_SLACK_TOKEN}", signing_secret: "${T_SLACK_SECRET}",
          api_url: "{url}/slack/api"}
  discord: {bot_token: "${T_DISCORD_TOKEN}", application_id: "42", public_key: "{pk}",
            api_url: "{url}/discord/api/v10"}
  webhooks:
    - {url: "{url}/hook", secret: "${T_WEBHOOK_SECRET}"}
  email: {host: 127.0.0.1, port: PORT, username: USER, password: "${T_SMTP_PASSWORD}",
          from: "signoff <signoff@example.org>", ca_file: "CA", timeout: 5}
  delivery: {backoff: 0.05, backoff_cap: 0.2, poll: 0.2}
"""


class Running:
    def __init__(self, gate: Gate, thread: ServerThread) -> None:
        self.gate, self.thread, self.url = gate, thread, thread.url
        self.http = httpx.Client(base_url=thread.url, timeout=10)

    def run(self, coro: Any) -> Any:
        return self.gate.run_sync(coro)

    def post(self, path: str, inbound: Inbound) -> httpx.Response:
        return self.http.post(path, content=inbound.body, headers=dict(inbound.headers))


@pytest.fixture
def smtp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SMTPServer]:
    monkeypatch.setenv("T_SMTP_PASSWORD", PASSWORD)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        server = SMTPServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def running(
    receiver: Receiver,
    discord_key: Ed25519PrivateKey,
    secrets: dict[str, str],
    smtp: SMTPServer,
) -> Iterator[Running]:
    section = (
        CHANNELS.replace("PORT", str(smtp.port)).replace("USER", USER).replace("CA", str(smtp.cert))
    )
    text = policy_text(receiver.url, public_hex(discord_key), channels=section)
    gate = Gate(Policy.from_yaml(text), MemoryStore())
    thread = ServerThread(create_app(gate, owns_gate=True))
    thread.start()
    yield Running(gate, thread)
    thread.stop()


def test_slack_clicks_arrive_at_hooks_slack_and_decide(
    running: Running, receiver: Receiver
) -> None:
    req = running.run(submit(running.gate))
    posts = receiver.wait_for("/slack/api/chat.postMessage", 2)
    click = slack_click(req.id, "UALICE", "signoff:approve", response_url=f"{receiver.url}/x")
    assert running.post("/hooks/slack", slack_callback(click)).status_code == 200
    forged = slack_callback(click, secret="not-the-secret")
    assert running.post("/hooks/slack", forged).status_code == 401
    assert running.run(running.gate.get(req.id)).status == "resolved"
    [post] = [p for p in posts if p.json()["channel"] == "UALICE"]
    open_button = [
        e for b in post.json()["blocks"] if b["type"] == "actions" for e in b["elements"]
    ][-1]
    assert open_button["url"] == f"{running.url}/requests/{req.id}"


def test_discord_pings_and_forgeries_at_hooks_discord(
    running: Running, discord_key: Ed25519PrivateKey
) -> None:
    ping = {"id": "p1", "type": 1}
    good = running.post("/hooks/discord", discord_callback(discord_key, ping))
    assert (good.status_code, good.json()) == (200, {"type": 1})
    assert good.headers["content-type"] == "application/json"
    bad = running.post("/hooks/discord", discord_callback(Ed25519PrivateKey.generate(), ping))
    assert bad.status_code == 401


def test_a_signed_webhook_decides_at_hooks_webhook(running: Running) -> None:
    req = running.run(submit(running.gate))
    body = {"request_id": req.id, "approver": "bob", "action": "reject", "message": "not now"}
    signed = webhook_callback(body)
    r = running.post("/hooks/webhook", signed)
    assert r.status_code == 200 and r.json()["status"] == "resolved"
    assert running.post("/hooks/webhook", signed).status_code == 409  # replayed webhook-id
    late = {"request_id": req.id, "approver": "alice", "action": "approve"}
    answer = running.post("/hooks/webhook", webhook_callback(late))
    assert answer.status_code == 409 and "by bob" in answer.json()["error"]


def test_a_channel_that_is_not_configured_answers_404(running: Running) -> None:
    assert running.http.post("/hooks/line", content=b"{}").status_code == 404
    assert running.http.get("/hooks/slack").status_code == 405


def test_the_email_link_lets_a_scanner_look_and_the_person_decide(
    running: Running, smtp: SMTPServer
) -> None:
    req = running.run(submit(running.gate))
    mails = smtp.mailbox.wait(2)
    alice = next(m["message"] for m in mails if m["to"] == ["alice@example.com"])
    text = body_text(alice, "plain")
    link = re.search(r"Review and decide: (\S+)", text)
    assert link is not None
    url = link.group(1)
    assert url.startswith(f"{running.url}/a/{req.id}?t=")
    assert f"{running.url}/requests/{req.id}" in text
    assert url.replace("&", "&amp;") in body_text(alice, "html")
    scanner = httpx.Client(timeout=10, headers={"User-Agent": "Safe Links scanner"})
    assert scanner.head(url).status_code == 200
    assert scanner.get(url).status_code == 200
    assert running.run(running.gate.get(req.id)).status == "pending"
    token = parse_qs(urlsplit(url).query)["t"][0]
    decided = running.http.post(
        urlsplit(url).path,
        data={"t": token, "decision": "approve"},
        headers={"Origin": running.url},
    )
    assert decided.status_code == 200
    after = running.run(running.gate.get(req.id))
    assert (after.status, after.decisions[0].approver, after.decisions[0].channel) == (
        "resolved",
        "alice",
        "link",
    )
