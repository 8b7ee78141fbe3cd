"""Discord: an app with real buttons, or a plain channel webhook with a link button.

**App mode** (``channels.discord: {bot_token, application_id, public_key, channel_id,
api_url}``): the bot posts to ``channel_id`` (mentioning the approvers) or, without it,
DMs each approver (``people.<id>.discord``). Approve / Reject / answer buttons arrive at
the Interactions Endpoint URL ``https://<your server>/hooks/discord``, verified with
Ed25519 over ``X-Signature-Timestamp + raw body`` under the app's public key (invalid
signatures get 401 — Discord probes this — and PING gets PONG). Discord documents no
freshness window; we refuse timestamps more than 5 minutes off, and each interaction id
once. The clicked message is replaced in the response (type 7); every other copy is
edited by the outbox. Reject asks for a reason in a modal. Creates carry a ``nonce`` with
``enforce_nonce``, so a retried post returns the first message instead of a duplicate.

**Webhook mode** (``{webhook_url}``): an embed with a link button to the web page (the
channel is shared, so no one-click decision links); edited to the outcome afterwards.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import Inbound, Outgoing, Reply, Target, message
from signoff.channels._http import request as http_request
from signoff.channels.config import DiscordConfig, missing_secrets
from signoff.channels.inbound import (
    FRESHNESS_S,
    Outcome,
    ReplayGuard,
    answer_by_choice,
    decide_as,
    fresh,
    may_act,
    page_url,
    person_by,
)
from signoff.channels.redact import Redactor, cut
from signoff.model import ApprovalRequest

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind

log = logging.getLogger("signoff.channels.discord")

PING, COMPONENT, MODAL_SUBMIT = 1, 3, 5
PONG, MESSAGE, UPDATE_MESSAGE, MODAL = 1, 4, 7, 9
EPHEMERAL = 64
PRIMARY, SECONDARY, SUCCESS, DANGER, LINK = 1, 2, 3, 4, 5
COLOR = {"pending": 0xF1C40F, "resolved": 0x2ECC71, "expired": 0x95A5A6, "cancelled": 0x95A5A6}


# ---------------------------------------------------------------- signatures
def verify(
    public_key_hex: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    window_s: float = FRESHNESS_S,
) -> bool:
    """Ed25519 over ``timestamp + body``; plus our own freshness window on the timestamp."""
    sig_hex = headers.get("x-signature-ed25519", "")
    ts = headers.get("x-signature-timestamp", "")
    if not sig_hex or not ts or not fresh(ts, now, window_s):
        return False
    return ed25519_valid(public_key_hex, sig_hex, ts.encode() + body)


def ed25519_valid(public_key_hex: str, signature_hex: str, signed: bytes) -> bool:
    """RFC 8032 Ed25519 verification (``cryptography``); malformed input is just invalid."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex))
        key.verify(bytes.fromhex(signature_hex), signed)
    except (InvalidSignature, ValueError):
        return False
    return True


# ---------------------------------------------------------------- messages
_MARKDOWN = re.compile(r"([\\*_~|`>#\-\[\]()<])")


def _md(text: str) -> str:
    """Discord markdown shown literally: a backslash before every character that could
    style, hide (``||spoiler||``), link (``[label](url)``) or mention (``<@…>``) — Discord
    drops the backslash before any punctuation, so the text reads as written."""
    return _MARKDOWN.sub(r"\\\1", text)


def embed(out: Outgoing, *, resolved: bool = False) -> dict[str, Any]:
    req = out.request
    question = message.question(req)
    text = (
        _md(question)
        if question
        else "\n".join(f"• {_md(line)}" for line in message.call_lines(req, out.redact))
    )
    fields = [{"name": "Context", "value": cut(_md(message.context_line(req)), 1024)}]
    if resolved:
        fields.insert(0, {"name": "Outcome", "value": cut(_md(message.outcome(req)), 1024)})
    elif not out.page_url:
        fields.append({"name": "How to decide", "value": cut(message.cli_hint(req), 1024)})
    return {
        "title": cut(_md(message.title(req, "prompt" if resolved else out.kind)), 256),
        "description": cut(text, 4000),
        "color": COLOR.get(req.status, 0x95A5A6),
        "fields": fields,
    }


def buttons(req: ApprovalRequest, page_url: str | None, *, live: bool) -> list[dict[str, Any]]:
    """Action rows: answers / Approve / Reject while pending, and Open (a link button)."""
    row: list[dict[str, Any]] = []
    if live:
        offer = message.choices(req, limit=3)
        for i, answer in enumerate(offer.answers):
            row.append(_button(PRIMARY, cut(answer, 80), f"signoff:respond:{req.id}:{i}"))
        if offer.approve:
            row.append(_button(SUCCESS, "Approve", f"signoff:approve:{req.id}"))
        if offer.reject:
            label = "Decline" if req.kind == "inquiry" else "Reject"
            row.append(_button(DANGER, label, f"signoff:reject:{req.id}"))
    if page_url:
        row.append({"type": 2, "style": LINK, "label": "Open", "url": page_url})
    return [{"type": 1, "components": row[:5]}] if row else []


def _button(style: int, label: str, custom_id: str) -> dict[str, Any]:
    return {"type": 2, "style": style, "label": label, "custom_id": custom_id[:100]}


def reason_modal(request_id: str) -> dict[str, Any]:
    return {
        "type": MODAL,
        "data": {
            "custom_id": f"signoff:reason:{request_id}"[:100],
            "title": "Reject",
            "components": [
                {
                    "type": 1,
                    "components": [
                        {
                            "type": 4,
                            "custom_id": "reason",
                            "label": "Why? (the agent sees this)",
                            "style": 2,
                            "required": False,
                            "max_length": 1000,
                        }
                    ],
                }
            ],
        },
    }


class DiscordChannel:
    """Discord app (buttons, verified interactions) or plain webhook (link button)."""

    name = "discord"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: DiscordConfig) -> None:
        self.config = config
        self.bot = config.bot_token is not None
        self.replays = ReplayGuard()

    def ready(self) -> str | None:
        return missing_secrets(self.config, "channels.discord")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        if not self.bot:
            return [Target("webhook")]
        if self.config.channel_id:
            mentions = tuple(p.discord for p in people if p.discord)
            return [Target(self.config.channel_id, None, mentions)]
        return [Target(p.discord, p.id) for p in people if p.discord]

    # ------------------------------------------------------------ outbound
    def _auth(self) -> dict[str, str]:
        assert self.config.bot_token is not None
        return {
            "Authorization": f"Bot {self.config.bot_token.value()}",
            "User-Agent": "DiscordBot (https://github.com/signoff/signoff, 0.1)",
        }

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        body: dict[str, Any] = {
            "embeds": [embed(out)],
            "components": buttons(out.request, out.page_url, live=self.bot),
            "allowed_mentions": {"parse": [], "users": list(out.target.mentions)},
        }
        if out.target.mentions:
            body["content"] = " ".join(f"<@{m}>" for m in out.target.mentions)
        if not self.bot:
            assert self.config.webhook_url is not None
            url = self.config.webhook_url.value()
            response = await http_request(
                http,
                "POST",
                url,
                what="discord webhook",
                json=body,
                params={"wait": "true", "with_components": "true"},
            )
            return {"message_id": str(response.json().get("id"))}
        channel_id = out.target.address
        if out.target.person is not None:  # a DM: open (or find) the DM channel first
            response = await http_request(
                http,
                "POST",
                f"{self.config.api_url}/users/@me/channels",
                what="discord open DM",
                json={"recipient_id": out.target.address},
                headers=self._auth(),
            )
            channel_id = str(response.json().get("id"))
        body["nonce"] = out.key[:25]
        body["enforce_nonce"] = True
        response = await http_request(
            http,
            "POST",
            f"{self.config.api_url}/channels/{channel_id}/messages",
            what="discord message",
            json=body,
            headers=self._auth(),
        )
        return {"channel_id": channel_id, "message_id": str(response.json().get("id"))}

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        body = {
            "content": "",
            "embeds": [embed(out, resolved=True)],
            "components": buttons(out.request, out.page_url, live=False),
            "allowed_mentions": {"parse": []},
        }
        if not self.bot:
            assert self.config.webhook_url is not None
            url = f"{self.config.webhook_url.value()}/messages/{ref.get('message_id')}"
            await http_request(
                http,
                "PATCH",
                url,
                what="discord webhook edit",
                json=body,
                params={"with_components": "true"},
            )
            return
        await http_request(
            http,
            "PATCH",
            f"{self.config.api_url}/channels/{ref.get('channel_id')}/messages/"
            f"{ref.get('message_id')}",
            what="discord message edit",
            json=body,
            headers=self._auth(),
        )

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        if not self.bot or self.config.public_key is None:
            return Reply(404, {"error": "discord is configured as a plain webhook (no buttons)"})
        if not verify(self.config.public_key, inbound.headers, inbound.body, inbound.now):
            return Reply(401, {"error": "invalid request signature"})
        try:
            interaction = json.loads(inbound.body)
        except ValueError:
            return Reply(400, {"error": "expected JSON"})
        if not isinstance(interaction, dict):
            return Reply(400, {"error": "expected a JSON object"})
        kind = interaction.get("type")
        if kind == PING:
            return Reply(200, {"type": PONG})
        if not self.replays.first_time(f"discord:{interaction.get('id')}", inbound.now):
            return Reply(409, {"error": "this interaction was already processed"})
        user = (interaction.get("member") or {}).get("user") or interaction.get("user") or {}
        person = person_by(gate, "discord", str(user.get("id") or ""))
        if person is None:
            return _ephemeral(
                f"Your Discord account ({user.get('id')}) is not linked to a signoff approver. "
                f'Ask an admin to add `discord: "{user.get("id")}"` to your entry in people:.'
            )
        data = interaction.get("data") or {}
        custom_id = str(data.get("custom_id") or "")
        if kind == COMPONENT:
            return await self._clicked(gate, person, custom_id)
        if kind == MODAL_SUBMIT and custom_id.startswith("signoff:reason:"):
            reason = _modal_value(data, "reason")
            request_id = custom_id.removeprefix("signoff:reason:")
            result = await decide_as(
                gate, request_id, person, "reject", channel="discord", message=reason
            )
            return self._answer(gate, result)
        return Reply(400, {"error": f"unsupported interaction type {kind}"})

    async def _clicked(self, gate: GateHandle, person: str, custom_id: str) -> Reply:
        parts = custom_id.split(":")
        if len(parts) < 3 or parts[0] != "signoff":
            return _ephemeral("This button is not from signoff.")
        action, request_id = parts[1], parts[2]
        if action == "reject":
            allowed = await may_act(gate, request_id, person)
            return Reply(200, reason_modal(request_id)) if allowed.ok else _ephemeral(allowed.text)
        if action == "approve":
            result = await decide_as(gate, request_id, person, "approve", channel="discord")
            return self._answer(gate, result)
        if action == "respond" and len(parts) == 4:
            result = await answer_by_choice(gate, request_id, person, parts[3], channel="discord")
            return self._answer(gate, result)
        return _ephemeral("Unknown action.")

    def _answer(self, gate: GateHandle, result: Outcome) -> Reply:
        """Success replaces the clicked message with the outcome; a refusal is private."""
        if not result.ok or result.request is None or result.request.pending:
            return _ephemeral(result.text)
        req = result.request
        url = page_url(gate, req.id)
        out = Outgoing("update", req, Target(""), "", Redactor.from_policy(gate.policy), url)
        return Reply(
            200,
            {
                "type": UPDATE_MESSAGE,
                "data": {
                    "content": "",
                    "embeds": [embed(out, resolved=True)],
                    "components": buttons(req, url, live=False),
                    "allowed_mentions": {"parse": []},
                },
            },
        )


def _ephemeral(text: str) -> Reply:
    return Reply(200, {"type": MESSAGE, "data": {"content": cut(text, 2000), "flags": EPHEMERAL}})


def _modal_value(data: Mapping[str, Any], custom_id: str) -> str | None:
    for row in data.get("components") or []:
        for component in row.get("components") or []:
            if component.get("custom_id") == custom_id:
                value = str(component.get("value") or "").strip()
                return value or None
    return None
