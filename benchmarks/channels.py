"""Notification channels: how soon the first notification lands, and how many forged
callbacks get through (must be none).

* **notify latency**: a gate on SQLite (``synchronous=FULL``: the request and its outbox
  rows in one fsynced transaction) with a Standard Webhooks subscriber and a Slack app, both
  pointed at a loopback receiver. Latency = start of ``gate.asubmit`` → the receiver
  reading the first request about it (``time.monotonic``, same process). Requests one at a
  time, so this is the path's latency, not throughput.
* **forged callbacks**: ``signoff serve`` on loopback with Slack, Discord, LINE and
  Standard Webhooks inbound; each attempt targets a fresh pending request: wrong secret or
  key, tampered body, stale and future timestamps, missing or empty signatures, a form
  re-encoded after signing, a validly signed callback from an unknown platform user or
  from a person without the role, and a replay of a valid callback. Accepted = the
  request changed or the endpoint answered as if it had acted.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from benchmarks.measure import Row, Target, fmt, judge, mark, summarize
from signoff import Gate, Policy, ToolCall
from signoff.store import MemoryStore, SQLiteStore, Store

LATENCY_TARGET = Target("notify.sqlite.first_ms.median", "<=", 100.0, "ms")
FORGED_TARGET = Target("forged.accepted", "<=", 0.0, "")

SLACK_SECRET = "bench-slack-signing-secret"
RESPONSE_URL = {"url": "https://hooks.slack.com/actions/x"}  # the receiver's, once it runs
LINE_SECRET = "bench-line-channel-secret"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"b" * 32).decode()


# ---------------------------------------------------------------------- provider stand-in
class Receiver:
    """Loopback HTTP server answering like Slack/Discord/LINE/a subscriber; notes when the
    first request mentioning each request id arrived."""

    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self._cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body in separate writes: no 40 ms stall

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                arrived = time.monotonic()
                text = body.decode("utf-8", "replace")
                with outer._cond:
                    for token in text.replace('"', " ").replace("\\", " ").split():
                        if token.startswith("req_") and token not in outer.first:
                            outer.first[token.rstrip(",):.")] = arrived
                    outer._cond.notify_all()
                if "/slack/" in self.path:
                    out = {"ok": True, "channel": "D1", "ts": f"{arrived:.6f}"}
                else:
                    out = {"id": "1"}
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_PATCH = do_POST

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def wait(self, request_id: str, timeout: float = 10.0) -> float:
        deadline = time.monotonic() + timeout
        with self._cond:
            while request_id not in self.first:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no notification for {request_id}")
                self._cond.wait(left)
            return self.first[request_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def policy_yaml(url: str, public_key: str) -> str:
    return textwrap.dedent(
        f"""\
        version: 1
        people:
          alice: {{roles: [finance], slack: UALICE, discord: "1001", line: Ualice}}
          dave:  {{roles: [ops], slack: UDAVE, discord: "1004", line: Udave}}
          erin:  {{roles: []}}
        tools:
          transfer_funds:
            default: require_approval
            approvers: {{roles: [finance]}}
            timeout: 1h
        channels:
          slack: {{bot_token: "${{B_SLACK_TOKEN}}", signing_secret: "${{B_SLACK_SECRET}}",
                  api_url: "{url}/slack/api"}}
          discord: {{bot_token: "${{B_DISCORD_TOKEN}}", application_id: "42",
                    public_key: "{public_key}", api_url: "{url}/discord/api/v10"}}
          line: {{channel_access_token: "${{B_LINE_TOKEN}}", channel_secret: "${{B_LINE_SECRET}}",
                 api_url: "{url}/line"}}
          webhooks:
            - {{url: "{url}/hook", secret: "${{B_WEBHOOK_SECRET}}"}}
          delivery: {{poll: 1}}
        """
    )


def set_secrets() -> None:
    os.environ.update(
        {
            "B_SLACK_TOKEN": "xoxb-bench",
            "B_SLACK_SECRET": SLACK_SECRET,
            "B_DISCORD_TOKEN": "discord-bench",
            "B_LINE_TOKEN": "line-bench",
            "B_LINE_SECRET": LINE_SECRET,
            "B_WEBHOOK_SECRET": WEBHOOK_SECRET,
        }
    )


def _ed25519() -> tuple[Any, str]:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = Ed25519PrivateKey.generate()
    return key, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


async def _submit(gate: Gate, n: int) -> str:
    ctx = gate.make_context("erin", thread=f"bench-{n}-{uuid.uuid4().hex[:6]}", agent="bench")
    sub = await gate.asubmit([ToolCall("transfer_funds", {"amount": n, "to": "ACME"})], ctx)
    assert sub.request is not None
    return sub.request.id


# ---------------------------------------------------------------------- notify latency
async def _latency(store: Store, text: str, rec: Receiver, n: int) -> dict[str, Any]:
    gate = Gate(Policy.from_yaml(text), store)
    samples: list[float] = []
    async with gate:
        for i in range(3):  # warm-up: connections, caches
            rid = await _submit(gate, i)
            await asyncio.to_thread(rec.wait, rid)
        for i in range(n):
            started = time.monotonic()
            rid = await _submit(gate, 1000 + i)
            arrived = await asyncio.to_thread(rec.wait, rid)
            samples.append((arrived - started) * 1000)
    return {"first_ms": summarize(samples), "requests": n}


def notify_latency(n: int) -> dict[str, Any]:
    set_secrets()
    rec = Receiver()
    _key, public = _ed25519()
    text = policy_yaml(rec.url, public)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = asyncio.run(_latency(SQLiteStore(Path(tmp) / "b.db"), text, rec, n))
        memory = asyncio.run(_latency(MemoryStore(), text, rec, n))
    finally:
        rec.close()
    return {"sqlite": sqlite, "memory": memory}


# ---------------------------------------------------------------------- forged callbacks
Attempt = tuple[str, str, Callable[[str], tuple[dict[str, str], bytes]]]


def _slack(
    request_id: str, user: str, *, secret: str = SLACK_SECRET, age: float = 0.0
) -> tuple[dict[str, str], bytes]:
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "container": {"message_ts": "1.1"},
        "response_url": RESPONSE_URL["url"],
        "actions": [
            {"action_id": "signoff:approve", "value": request_id, "action_ts": uuid.uuid4().hex}
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    ts = str(int(time.time() - age))
    mac = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {"x-slack-request-timestamp": ts, "x-slack-signature": "v0=" + mac.hexdigest()}, body


def _discord(
    key: Any, request_id: str, user: str, *, age: float = 0.0
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(
        {
            "id": uuid.uuid4().hex,
            "type": 3,
            "member": {"user": {"id": user}},
            "data": {"custom_id": f"signoff:approve:{request_id}"},
        }
    ).encode()
    ts = str(int(time.time() - age))
    return {
        "x-signature-ed25519": key.sign(ts.encode() + body).hex(),
        "x-signature-timestamp": ts,
    }, body


def _line(
    request_id: str, user: str, *, secret: str = LINE_SECRET, age: float = 0.0
) -> tuple[dict[str, str], bytes]:
    event = {
        "type": "postback",
        "timestamp": int((time.time() - age) * 1000),
        "webhookEventId": uuid.uuid4().hex,
        "source": {"type": "user", "userId": user},
        "replyToken": "r",
        "postback": {"data": f"a=approve&r={request_id}"},
    }
    body = json.dumps({"destination": "Ubot", "events": [event]}).encode()
    sig = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    return {"x-line-signature": sig}, body


def _webhook(
    request_id: str, approver: str, *, secret: str = WEBHOOK_SECRET, age: float = 0.0
) -> tuple[dict[str, str], bytes]:
    from signoff.channels.webhooks import sign

    body = json.dumps({"request_id": request_id, "approver": approver, "action": "approve"})
    ts, mid = int(time.time() - age), f"msg_{uuid.uuid4().hex}"
    raw = body.encode()
    headers = {"webhook-id": mid, "webhook-timestamp": str(ts)}
    return {**headers, "webhook-signature": sign(secret, mid, ts, raw)}, raw


def _tamper(make: Callable[[str], tuple[dict[str, str], bytes]], old: str, new: str) -> Any:
    def forged(rid: str) -> tuple[dict[str, str], bytes]:
        headers, body = make(rid)
        return headers, body.replace(old.encode(), new.encode())

    return forged


def _strip(make: Callable[[str], tuple[dict[str, str], bytes]], *names: str) -> Any:
    def forged(rid: str) -> tuple[dict[str, str], bytes]:
        headers, body = make(rid)
        return {k: ("" if k in names else v) for k, v in headers.items()}, body

    return forged


def attempts(key: Any, wrong_key: Any) -> list[Attempt]:
    """(channel path, what, signed-request maker) for every forgery."""
    stale, future = 600.0, -600.0
    out: list[Attempt] = []
    makers = {
        "/hooks/slack": (
            lambda r, **k: _slack(r, "UALICE", **k),
            lambda r: _slack(r, "UALICE", secret="guessed"),
            ("UALICE", "UDAVE"),
            lambda r: _slack(r, "UNOBODY"),
            lambda r: _slack(r, "UDAVE"),
        ),
        "/hooks/discord": (
            lambda r, **k: _discord(key, r, "1001", **k),
            lambda r: _discord(wrong_key, r, "1001"),
            ("1001", "1004"),
            lambda r: _discord(key, r, "9999"),
            lambda r: _discord(key, r, "1004"),
        ),
        "/hooks/line": (
            lambda r, **k: _line(r, "Ualice", **k),
            lambda r: _line(r, "Ualice", secret="guessed"),
            ("Ualice", "Udave"),
            lambda r: _line(r, "Unobody"),
            lambda r: _line(r, "Udave"),
        ),
        "/hooks/webhook": (
            lambda r, **k: _webhook(r, "alice", **k),
            lambda r: _webhook(r, "alice", secret="whsec_" + base64.b64encode(b"x" * 32).decode()),
            ('"alice"', '"dave"'),
            lambda r: _webhook(r, "mallory"),
            lambda r: _webhook(r, "dave"),
        ),
    }
    for path, (valid, wrong, (who, other), unknown, no_role) in makers.items():
        out += [
            (path, "wrong secret or key", wrong),
            (path, "tampered body", _tamper(valid, who, other)),
            (path, "stale timestamp", lambda r, v=valid: v(r, age=stale)),
            (path, "future timestamp", lambda r, v=valid: v(r, age=future)),
            (
                path,
                "no signature",
                _strip(
                    valid,
                    "x-slack-signature",
                    "x-signature-ed25519",
                    "x-line-signature",
                    "webhook-signature",
                ),
            ),
            (path, "unknown user", unknown),
            (path, "user without the role", no_role),
        ]
        if path == "/hooks/slack":
            out.append((path, "re-encoded form", _tamper(valid, "%22", "%27")))
    return out


def _acted(path: str, response: httpx.Response) -> bool:
    """Whether the endpoint answered as if it had decided something."""
    if response.status_code >= 300:
        return False
    if path == "/hooks/line":
        return "decided" in response.json().get("results", [])
    if path == "/hooks/discord":
        return response.json().get("type") == 7
    return path == "/hooks/webhook"  # Slack answers 200 either way; the request state tells


def forged_suite(rounds: int) -> dict[str, Any]:
    from signoff.server import ServerThread, create_app

    set_secrets()
    rec = Receiver()
    RESPONSE_URL["url"] = f"{rec.url}/slack/actions"
    key, public = _ed25519()
    wrong_key, _ = _ed25519()
    gate = Gate(Policy.from_yaml(policy_yaml(rec.url, public)), MemoryStore())
    thread = ServerThread(create_app(gate, owns_gate=True))
    thread.start()
    tried = accepted = 0
    by_kind: dict[str, int] = {}
    try:
        http = httpx.Client(base_url=thread.url, timeout=10)
        for _ in range(rounds):
            for path, what, make in attempts(key, wrong_key):
                rid = gate.run_sync(_submit(gate, tried))
                before = gate.run_sync(gate.get(rid)).version
                headers, body = make(rid)
                response = http.post(path, content=body, headers=headers)
                changed = gate.run_sync(gate.get(rid)).version != before
                tried += 1
                by_kind[what] = by_kind.get(what, 0) + 1
                if changed or _acted(path, response):
                    accepted += 1
            for path, valid in (
                ("/hooks/slack", lambda r: _slack(r, "UALICE")),
                ("/hooks/discord", lambda r: _discord(key, r, "1001")),
                ("/hooks/line", lambda r: _line(r, "Ualice")),
                ("/hooks/webhook", lambda r: _webhook(r, "alice")),
            ):
                rid = gate.run_sync(_submit(gate, tried))
                headers, body = valid(rid)
                first = http.post(path, content=body, headers=headers)
                assert gate.run_sync(gate.get(rid)).status == "resolved", (path, first.text)
                replay = http.post(path, content=body, headers=headers)
                tried += 1
                by_kind["replay of a valid callback"] = (
                    by_kind.get("replay of a valid callback", 0) + 1
                )
                if _acted(path, replay) and replay.status_code < 400:
                    accepted += 1
        http.close()
    finally:
        thread.stop()
        rec.close()
    return {"tried": tried, "accepted": accepted, "by_kind": by_kind}


# ---------------------------------------------------------------------- entry points
def run(quick: bool) -> dict[str, Any]:
    result = {
        "method": (
            "notify: SQLite FULL / memory gate, Slack app + Standard Webhooks subscriber on a "
            "loopback receiver, asubmit -> first request about it received, sequential; "
            "forged: signoff serve on loopback, signed-for-real forgeries against "
            "/hooks/{slack,discord,line,webhook}, each on a fresh pending request"
        ),
        "notify": notify_latency(30 if quick else 200),
        "forged": forged_suite(1 if quick else 5),
    }
    return judge(result, [LATENCY_TARGET, FORGED_TARGET])


def rows(result: dict[str, Any]) -> list[Row]:
    met = result["targets_met"]
    out = []
    for store in ("sqlite", "memory"):
        r = result["notify"][store]
        out.append(
            Row(
                f"first notification received ({store}{', FULL' if store == 'sqlite' else ''}), "
                "p50/p99",
                f"{fmt(r['first_ms']['median'], 'ms', 1)} / {fmt(r['first_ms']['p99'], 'ms', 1)}",
                f"≤ 100 ms: {mark(met[LATENCY_TARGET.describe()])}" if store == "sqlite" else "",
                f"submit → loopback receiver; n={r['requests']}",
            )
        )
    f = result["forged"]
    out.append(
        Row(
            "forged callbacks accepted / tried",
            f"{f['accepted']} / {f['tried']}",
            f"0 accepted: {mark(met[FORGED_TARGET.describe()])}",
            "bad/missing signatures, tampering, stale/future, unknown or unqualified users, "
            "replays; Slack, Discord, LINE, Standard Webhooks",
        )
    )
    return out
