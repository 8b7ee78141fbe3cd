"""LINE: a push message with postback buttons through the Messaging API.

LINE Notify was shut down on 2025-03-31; this uses the **Messaging API**.

**Provider side**: a LINE Official Account with a Messaging API channel; its channel access
token and channel secret; webhook URL ``https://<your server>/hooks/line`` with "Use
webhook" on. Config: ``channels.line: {channel_access_token, channel_secret, api_url}``.
Approvers add the account as a friend; ``people.<id>.line`` is their LINE user id
(``U…``, 33 characters).

**Onboarding**: a user id is not shown in the LINE app. Anyone who adds the account (a
``follow`` event) or writes to it gets a reply with their user id and whether it is linked
to an approver; an admin puts it into ``people:``.

**Out**: ``POST /v2/bot/message/push`` with a confirm template (Approve / Reject postbacks)
or, for a question, a buttons template (its choices). Every attempt of one message carries
the same ``X-Line-Retry-Key``; a 409 for it means LINE already accepted it (delivered).
LINE cannot edit a pushed message, so the outcome goes out as a short follow-up message.

**In**: ``x-line-signature`` = base64 HMAC-SHA256 of the raw body under the channel
secret. LINE sends no timestamp header: each event's signed ``timestamp`` must be within
5 minutes and each ``webhookEventId`` is processed once. The postback's ``source.userId``
must be an approver's ``line`` id.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from signoff.channels import DeliveryError, Inbound, Outgoing, Reply, Target, message
from signoff.channels._http import request as http_request
from signoff.channels._http import tls
from signoff.channels.config import LineConfig, missing_secrets
from signoff.channels.inbound import (
    FRESHNESS_S,
    ReplayGuard,
    answer_by_choice,
    decide_as,
    fresh,
    person_by,
)
from signoff.channels.redact import cut

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind

log = logging.getLogger("signoff.channels.line")


def signature(channel_secret: str, body: bytes) -> str:
    mac = hmac.new(channel_secret.encode(), body, hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def verify(channel_secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Constant-time compare of the decoded signature bytes."""
    given = headers.get("x-line-signature", "")
    if not given:
        return False
    try:
        decoded = base64.b64decode(given, validate=True)
    except (binascii.Error, ValueError):
        return False
    mac = hmac.new(channel_secret.encode(), body, hashlib.sha256).digest()
    return hmac.compare_digest(mac, decoded)


def retry_key(key: str) -> str:
    """A UUID (LINE's required format) that is the same for every attempt of one message."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"signoff:{key}"))


def _postback(label: str, data: Mapping[str, str], shown: str) -> dict[str, Any]:
    return {
        "type": "postback",
        "label": cut(label, 20),
        "data": urlencode(data)[:300],
        "displayText": cut(shown, 300),
    }


def template(out: Outgoing) -> dict[str, Any]:
    """A confirm template (Approve/Reject) or buttons (a question's choices, Open)."""
    req = out.request
    head = message.title(req, out.kind)
    body = message.question(req) or "; ".join(message.call_lines(req, out.redact, limit=120))
    text = f"{head}\n{body}" if body else head
    offer = message.choices(req, limit=3)
    if req.kind != "inquiry" and offer.approve and offer.reject:
        return {
            "type": "template",
            "altText": cut(head, 400),
            "template": {
                "type": "confirm",
                "text": cut(text, 240),
                "actions": [
                    _postback("Approve", {"a": "approve", "r": req.id}, "Approve"),
                    _postback("Reject", {"a": "reject", "r": req.id}, "Reject"),
                ],
            },
        }
    actions = [
        _postback(answer, {"a": "respond", "r": req.id, "c": str(i)}, answer)
        for i, answer in enumerate(offer.answers)
    ]
    if offer.approve:
        actions.append(_postback("Approve", {"a": "approve", "r": req.id}, "Approve"))
    if offer.reject:
        label = "Decline" if req.kind == "inquiry" else "Reject"
        actions.append(_postback(label, {"a": "reject", "r": req.id}, label))
    if out.page_url and len(actions) < 4:
        actions.append({"type": "uri", "label": "Open", "uri": out.page_url})
    if not actions:
        return {"type": "text", "text": cut(f"{text}\n{message.cli_hint(req)}", 5000)}
    return {
        "type": "template",
        "altText": cut(head, 400),
        "template": {"type": "buttons", "text": cut(text, 160), "actions": actions[:4]},
    }


class LineChannel:
    """LINE Messaging API push + verified postback webhook."""

    name = "line"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: LineConfig) -> None:
        self.config = config
        self.replays = ReplayGuard()

    def ready(self) -> str | None:
        return missing_secrets(self.config, "channels.line")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        return [Target(p.line, p.id) for p in people if p.line]

    def _headers(self, key: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.config.channel_access_token.value()}"}
        if key is not None:
            headers["X-Line-Retry-Key"] = retry_key(key)
        return headers

    async def _push(self, http: httpx.AsyncClient, to: str, msg: dict[str, Any], key: str) -> None:
        await http_request(
            http,
            "POST",
            f"{self.config.api_url}/v2/bot/message/push",
            what="line push",
            json={"to": to, "messages": [msg]},
            headers=self._headers(key),
            ok=frozenset({409}),  # 409 for our retry key: LINE already accepted it
        )

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        await self._push(http, out.target.address, template(out), out.key)
        return {"to": out.target.address}

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        req = out.request
        if any(d.approver == out.target.person and d.channel == "line" for d in req.decisions):
            return  # they decided here and already got the outcome as the reply
        text = f"{message.title(out.request)} ({out.request.id}): {message.outcome(out.request)}"
        await self._push(http, out.target.address, {"type": "text", "text": text}, out.key)

    async def _reply(self, token: str | None, text: str) -> None:
        if not token:
            return
        import httpx

        try:
            async with httpx.AsyncClient(timeout=5.0, verify=tls()) as http:
                await http_request(
                    http,
                    "POST",
                    f"{self.config.api_url}/v2/bot/message/reply",
                    what="line reply",
                    json={"replyToken": token, "messages": [{"type": "text", "text": text}]},
                    headers=self._headers(),
                )
        except DeliveryError as exc:
            log.warning("could not reply on LINE: %s", exc)

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        if not verify(self.config.channel_secret.value(), inbound.headers, inbound.body):
            return Reply(401, {"error": "invalid x-line-signature"})
        try:
            body = json.loads(inbound.body)
            events = body.get("events") or []
        except (ValueError, AttributeError):
            return Reply(400, {"error": "expected a JSON object with events"})
        results = [await self._event(e, gate, inbound.now) for e in events if isinstance(e, dict)]
        return Reply(200, {"results": results})

    async def _event(self, event: dict[str, Any], gate: GateHandle, now: float) -> str:
        event_id = str(event.get("webhookEventId") or "")
        stamp = event.get("timestamp")
        if not isinstance(stamp, int | float) or not fresh(stamp / 1000, now, FRESHNESS_S):
            return "stale"
        if not event_id or not self.replays.first_time(f"line:{event_id}", now):
            return "replayed"
        user = str((event.get("source") or {}).get("userId") or "")
        person = person_by(gate, "line", user)
        token = event.get("replyToken")
        kind = event.get("type")
        if kind in ("follow", "message"):
            await self._reply(token, _onboarding(user, person))
            return "onboarded"
        if kind != "postback":
            return "ignored"
        if person is None:
            await self._reply(token, _onboarding(user, None))
            return "unknown user"
        data = {
            k: v[0] for k, v in parse_qs(str((event.get("postback") or {}).get("data"))).items()
        }
        result = await self._decide(gate, person, data)
        await self._reply(token, result[1])
        return result[0]

    async def _decide(
        self, gate: GateHandle, person: str, data: Mapping[str, str]
    ) -> tuple[str, str]:
        action, request_id = data.get("a"), data.get("r") or ""
        if action == "respond":
            result = await answer_by_choice(
                gate, request_id, person, data.get("c", ""), channel="line"
            )
        elif action in ("approve", "reject"):
            result = await decide_as(
                gate,
                request_id,
                person,
                "approve" if action == "approve" else "reject",
                channel="line",
            )
        else:
            return "refused", "Unknown action."
        return ("decided" if result.ok else "refused"), result.text


def _onboarding(user: str, person: str | None) -> str:
    if person is not None:
        return f"You are linked to signoff as {person}. Approval requests for you arrive here."
    return (
        f"Your LINE user id is {user}. To get approval requests here, ask your signoff admin "
        f"to add `line: {user}` to your entry in people: of signoff.yaml."
    )
