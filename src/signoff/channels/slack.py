"""Slack: a Block Kit message with Approve / Reject / Open, decided by a verified click.

**Provider side**: a Slack app with a bot token (scopes ``chat:write``, ``im:write``; plus
``chat:write.public`` to post in a channel it has not joined), Interactivity on, Request
URL ``https://<your server>/hooks/slack``. Config: ``channels.slack: {bot_token,
signing_secret, api_url}`` (``api_url`` for tests and Enterprise Grid), optional
``channel`` to post once into a channel instead of a DM per approver.

**Out**: ``chat.postMessage`` (link unfurling off) to each approver's ``people.<id>.slack``
user id; the answer's ``channel`` + ``ts`` are kept, and when the request resolves
``chat.update`` replaces the buttons with who decided — on every copy, so nobody acts on a
stale prompt. Slack has no idempotency key: a timeout after Slack accepted a post can
duplicate it (the decision stays single).

**In** (``POST /hooks/slack``): ``X-Slack-Signature`` = ``v0=`` hex HMAC-SHA256 of
``v0:{timestamp}:{raw body}`` under the signing secret, timestamp within 5 minutes, and
each (user, message, action) once. The Slack user must be a person in ``people:`` who may
decide; anyone else gets an ephemeral refusal and nothing changes. Reject opens a modal for
the reason (``views.open``); edits happen on the web page.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from signoff.channels import DeliveryError, Inbound, Outgoing, Reply, Target, message
from signoff.channels._http import request as http_request
from signoff.channels._http import tls
from signoff.channels.config import SlackConfig, missing_secrets
from signoff.channels.inbound import (
    FRESHNESS_S,
    ReplayGuard,
    answer_by_choice,
    decide_as,
    fresh,
    may_act,
    person_by,
)
from signoff.channels.redact import cut
from signoff.model import ApprovalRequest

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind

log = logging.getLogger("signoff.channels.slack")

#: Slack "ok": false errors worth another try (the rest are configuration problems).
RETRYABLE = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


# ---------------------------------------------------------------- request signing
def signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    window_s: float = FRESHNESS_S,
) -> bool:
    """Slack's v0 scheme on the raw bytes (never a re-encoded form)."""
    ts = headers.get("x-slack-request-timestamp", "")
    given = headers.get("x-slack-signature", "")
    if not ts.isdigit() or not given or not fresh(ts, now, window_s):
        return False
    return hmac.compare_digest(signature(secret, ts, body), given)


# ---------------------------------------------------------------- Block Kit
def _esc(text: str) -> str:
    """Slack's three control characters escaped: no ``<link|label>``, ``<!channel>`` or
    ``<@U…>`` can come from agent text (it is already inert: see ``message``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text(kind: str, text: str) -> dict[str, Any]:
    if kind == "mrkdwn":  # verbatim: no auto-linking of bare names, channels or mentions
        return {"type": kind, "text": text, "verbatim": True}
    return {"type": kind, "text": text}


def prompt_blocks(out: Outgoing) -> list[dict[str, Any]]:
    """The question: title, calls (redacted), context, buttons."""
    req = out.request
    head = f"*{_esc(message.title(req, out.kind))}*"
    if out.target.mentions:
        head = " ".join(f"<@{m}>" for m in out.target.mentions) + " " + head
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _text("mrkdwn", head)}]
    body = _esc(message.question(req) or "") or "\n".join(
        f"• {_esc(line)}" for line in message.call_lines(req, out.redact)
    )
    if body:
        blocks.append({"type": "section", "text": _text("mrkdwn", cut(body, 2900))})
    context = message.context_line(req)
    if not out.page_url:
        context += " · " + message.cli_hint(req)
    blocks.append({"type": "context", "elements": [_text("mrkdwn", _esc(context))]})
    buttons = _buttons(req, out.page_url)
    if buttons:
        blocks.append({"type": "actions", "block_id": f"signoff:{req.id}", "elements": buttons})
    return blocks


def _buttons(req: ApprovalRequest, page_url: str | None) -> list[dict[str, Any]]:
    offer = message.choices(req)
    buttons: list[dict[str, Any]] = []
    for i, answer in enumerate(offer.answers):
        buttons.append(_button(f"signoff:respond:{i}", cut(answer, 75), req.id))
    if offer.approve:
        button = _button("signoff:approve", "Approve", req.id, "primary")
        button["confirm"] = {
            "title": _text("plain_text", "Approve?"),
            "text": _text("plain_text", cut(message.title(req), 290)),
            "confirm": _text("plain_text", "Approve"),
            "deny": _text("plain_text", "Cancel"),
        }
        buttons.append(button)
    if offer.reject:
        label = "Decline" if req.kind == "inquiry" else "Reject"
        buttons.append(_button("signoff:reject", label, req.id, "danger"))
    if page_url:
        buttons.append(
            {
                "type": "button",
                "action_id": "signoff:open",
                "text": _text("plain_text", "Open"),
                "url": page_url,
            }
        )
    return buttons


def _button(action_id: str, label: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": _text("plain_text", label),
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def outcome_blocks(out: Outgoing) -> list[dict[str, Any]]:
    """The resolved message: who decided, the calls, and only the Open button."""
    req = out.request
    head = f"*{_esc(message.title(req))}*\n{_esc(message.outcome(req))}"
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _text("mrkdwn", head)}]
    lines = message.call_lines(req, out.redact)
    if lines:
        text = "\n".join(f"• {_esc(line)}" for line in lines)
        blocks.append({"type": "section", "text": _text("mrkdwn", cut(text, 2900))})
    if out.page_url:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "signoff:open",
                        "text": _text("plain_text", "Open"),
                        "url": out.page_url,
                    }
                ],
            }
        )
    return blocks


def reason_modal(request_id: str, title: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "signoff:reject",
        "private_metadata": request_id,
        "title": _text("plain_text", "Reject"),
        "submit": _text("plain_text", "Reject"),
        "close": _text("plain_text", "Cancel"),
        "blocks": [
            {"type": "section", "text": _text("mrkdwn", _esc(cut(title, 2900)))},
            {
                "type": "input",
                "block_id": "reason",
                "optional": True,
                "label": _text("plain_text", "Why? (the agent sees this)"),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "reason",
                    "multiline": True,
                    "max_length": 1000,
                },
            },
        ],
    }


class SlackChannel:
    """Slack DMs (or one channel post) with buttons; verified interactivity callbacks."""

    name = "slack"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: SlackConfig) -> None:
        self.config = config
        self.replays = ReplayGuard()
        self.api_host = urlsplit(config.api_url).netloc

    def ready(self) -> str | None:
        return missing_secrets(self.config, "channels.slack")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        if self.config.channel:
            mentions = tuple(p.slack for p in people if p.slack)
            return [Target(self.config.channel, None, mentions)]
        return [Target(p.slack, p.id) for p in people if p.slack]

    # ------------------------------------------------------------ outbound
    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        data = await self.call(
            http,
            "chat.postMessage",
            {
                "channel": out.target.address,
                "text": _esc(message.title(out.request, out.kind)),
                "blocks": prompt_blocks(out),
                "unfurl_links": False,
                "unfurl_media": False,
            },
        )
        return {"channel": data.get("channel"), "ts": data.get("ts")}

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        await self.call(
            http,
            "chat.update",
            {
                "channel": ref.get("channel"),
                "ts": ref.get("ts"),
                "text": _esc(f"{message.title(out.request)} — {message.outcome(out.request)}"),
                "blocks": outcome_blocks(out),
            },
        )

    async def call(self, http: httpx.AsyncClient, method: str, body: dict[str, Any]) -> Any:
        """One Web API call; Slack reports errors as HTTP 200 with ``"ok": false``."""
        response = await http_request(
            http,
            "POST",
            f"{self.config.api_url}/{method}",
            what=f"slack {method}",
            json=body,
            headers={"Authorization": f"Bearer {self.config.bot_token.value()}"},
        )
        try:
            data = response.json()
        except ValueError:
            raise DeliveryError(f"slack {method}: not JSON", retryable=True) from None
        if not isinstance(data, dict) or not data.get("ok"):
            error = str(data.get("error") if isinstance(data, dict) else data)
            raise DeliveryError(f"slack {method}: {error}", retryable=error in RETRYABLE)
        return data

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        secret = self.config.signing_secret.value()
        if not verify(secret, inbound.headers, inbound.body, inbound.now):
            return Reply(401, {"error": "bad or stale Slack signature"})
        try:
            form = parse_qs(inbound.body.decode("utf-8"), strict_parsing=True)
            payload = json.loads(form["payload"][0])
        except (ValueError, KeyError, UnicodeDecodeError):
            return Reply(400, {"error": "expected a form with a JSON payload"})
        if not isinstance(payload, dict):
            return Reply(400, {"error": "expected a JSON object payload"})
        kind = payload.get("type")
        if kind == "block_actions":
            return await self._clicked(payload, gate, inbound.now)
        if kind == "view_submission":
            return await self._submitted(payload, gate, inbound.now)
        return Reply(200)

    async def _clicked(self, payload: dict[str, Any], gate: GateHandle, now: float) -> Reply:
        user = str((payload.get("user") or {}).get("id") or "")
        actions = payload.get("actions") or [{}]
        act = actions[0] if isinstance(actions[0], dict) else {}
        action_id = str(act.get("action_id") or "")
        request_id = str(act.get("value") or "")
        if action_id == "signoff:open" or not action_id.startswith("signoff:"):
            return Reply(200)  # link buttons also report their click
        message_ts = (payload.get("container") or {}).get("message_ts")
        if not self.replays.first_time(f"{user}:{message_ts}:{act.get('action_ts')}", now):
            return Reply(409, {"error": "this interaction was already processed"})
        person = person_by(gate, "slack", user)
        if person is None:
            await self._ephemeral(payload, _unknown(user))
            return Reply(200)
        if action_id == "signoff:reject":
            return await self._ask_reason(payload, gate, request_id, person)
        if action_id.startswith("signoff:respond:"):
            index = action_id.rsplit(":", 1)[1]
            result = await answer_by_choice(gate, request_id, person, index, channel="slack")
        elif action_id == "signoff:approve":
            result = await decide_as(gate, request_id, person, "approve", channel="slack")
        else:
            return Reply(200)
        if not result.ok:
            await self._ephemeral(payload, result.text)
        return Reply(200)

    async def _ask_reason(
        self, payload: dict[str, Any], gate: GateHandle, request_id: str, person: str
    ) -> Reply:
        allowed = await may_act(gate, request_id, person)
        if not allowed.ok or allowed.request is None:
            await self._ephemeral(payload, allowed.text)
            return Reply(200)
        import httpx

        try:
            async with httpx.AsyncClient(timeout=2.5, verify=tls()) as http:
                await self.call(
                    http,
                    "views.open",
                    {
                        "trigger_id": payload.get("trigger_id"),
                        "view": reason_modal(request_id, message.title(allowed.request)),
                    },
                )
        except DeliveryError as exc:
            log.warning("could not open the reject form: %s", exc)
            result = await decide_as(gate, request_id, person, "reject", channel="slack")
            if not result.ok:
                await self._ephemeral(payload, result.text)
        return Reply(200)

    async def _submitted(self, payload: dict[str, Any], gate: GateHandle, now: float) -> Reply:
        view = payload.get("view") or {}
        if view.get("callback_id") != "signoff:reject":
            return Reply(200)
        user = str((payload.get("user") or {}).get("id") or "")
        if not self.replays.first_time(f"view:{user}:{view.get('id')}", now):
            return Reply(409, {"error": "this submission was already processed"})
        person = person_by(gate, "slack", user)
        if person is None:
            return Reply(200, {"response_action": "errors", "errors": {"reason": _unknown(user)}})
        values = ((view.get("state") or {}).get("values") or {}).get("reason") or {}
        reason = str((values.get("reason") or {}).get("value") or "").strip() or None
        request_id = str(view.get("private_metadata") or "")
        result = await decide_as(
            gate, request_id, person, "reject", channel="slack", message=reason
        )
        if result.ok:
            return Reply(200, {"response_action": "clear"})
        return Reply(
            200, {"response_action": "errors", "errors": {"reason": cut(result.text, 150)}}
        )

    async def _ephemeral(self, payload: dict[str, Any], text: str) -> None:
        """Reply to the clicker only, through the interaction's ``response_url``."""
        url = str(payload.get("response_url") or "")
        host = urlsplit(url).netloc
        if not url or host not in ("hooks.slack.com", self.api_host):
            log.warning("not answering through an unexpected response_url host %r", host)
            return
        import httpx

        try:
            async with httpx.AsyncClient(timeout=2.5, verify=tls()) as http:
                await http_request(
                    http,
                    "POST",
                    url,
                    what="slack response_url",
                    json={"response_type": "ephemeral", "replace_original": False, "text": text},
                )
        except DeliveryError as exc:
            log.warning("could not answer the clicker: %s", exc)


def _unknown(user: str) -> str:
    return (
        f"Your Slack account ({user}) is not linked to a signoff approver. Ask an admin to add "
        f"`slack: {user}` to your entry in people: of signoff.yaml."
    )
