"""Telegram: a bot message with an inline keyboard, decided by a callback query.

**Provider side**: a bot from @BotFather (its token) and a webhook secret of our choosing;
``signoff channels setup telegram`` calls ``setWebhook`` with
``https://<your server>/hooks/telegram`` and the secret. Config: ``channels.telegram:
{bot_token, webhook_secret, api_url}``. ``people.<id>.telegram`` is the person's numeric
Telegram user id; a bot can message a person only after they pressed *Start*.

**Onboarding**: ``signoff channels setup telegram`` prints one ``t.me/<bot>?start=<code>``
link per person in ``people:``; the code is an HMAC of the person id under the webhook
secret, so the bot can tell who opened the link. ``/start <code>`` answers with the
sender's user id and the exact ``telegram:`` line to add for that person (like LINE, the
directory stays a file an admin edits).

**Out**: ``sendMessage`` (HTML; every agent-controlled string inside one ``<pre>`` block,
escaped — no links, mentions, commands or hashtags are detected there) with an inline
keyboard: Approve / Reject / a question's choices / Open. A button's ``callback_data`` (at
most 64 bytes) is an opaque token: AES-SIV of (action, request id) under a key derived from
the webhook secret, so it is short, not the request, and cannot be forged or edited by a
client (Telegram warns that clients may send arbitrary ``callback_data``). When the request
resolves, ``editMessageText`` replaces every copy with the outcome.

**In** (``POST /hooks/telegram``): Telegram signs nothing. Every update carries the
static ``X-Telegram-Bot-Api-Secret-Token`` header (compared in constant time) and no
timestamp, so freshness cannot be checked: each ``update_id`` is processed once, and the
gate's first-valid-decision-wins makes any replay of a decision a no-op. The approver is
``callback_query.from.id`` mapped through ``people:``; every click is answered with
``answerCallbackQuery``. Reject asks for the reason with a force-reply message; the
reply rejects.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import DeliveryError, Inbound, Outgoing, Reply, Target, message
from signoff.channels._http import request as http_request
from signoff.channels._http import tls
from signoff.channels.config import TelegramConfig, missing_secrets
from signoff.channels.inbound import (
    ReplayGuard,
    answer_by_choice,
    decide_as,
    may_act,
    person_by,
)
from signoff.channels.redact import cut

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind

log = logging.getLogger("signoff.channels.telegram")

CALLBACK_DATA_MAX = 64  # bytes (Telegram's limit for InlineKeyboardButton.callback_data)
TEXT_MAX = 4096  # characters of a message after entity parsing
SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
REASON_PROMPT = re.compile(r"^Reject ([A-Za-z0-9_-]+)(?:\s|$)")
ACTIONS = {"a": "approve", "r": "reject"}


# ---------------------------------------------------------------- tokens
def _key(secret: str, purpose: bytes) -> bytes:
    return hashlib.sha512(b"signoff telegram " + purpose + b"\0" + secret.encode()).digest()


def seal(secret: str, action: str, request_id: str) -> str:
    """The ``callback_data`` of one button: opaque, authenticated, deterministic."""
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    box = AESSIV(_key(secret, b"callback"))
    raw = box.encrypt(f"{action}|{request_id}".encode(), None)
    token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    if len(token) > CALLBACK_DATA_MAX:
        raise DeliveryError(
            f"telegram: request id {request_id!r} is too long for a button", retryable=False
        )
    return token


def unseal(secret: str, token: object) -> tuple[str, str] | None:
    """(action, request id) of a token we made, or None for anything else."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    if not isinstance(token, str) or not 0 < len(token) <= CALLBACK_DATA_MAX:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        plain = AESSIV(_key(secret, b"callback")).decrypt(raw, None).decode()
        action, _, request_id = plain.partition("|")
    except (InvalidTag, ValueError, UnicodeDecodeError):
        return None
    return (action, request_id) if request_id else None


def link_code(secret: str, person: str) -> str:
    """The ``/start`` code of one person's onboarding link (A-Z a-z 0-9 _ -, 22 chars)."""
    mac = hmac.new(_key(secret, b"link"), person.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac[:16]).rstrip(b"=").decode()


def person_id(query: Mapping[str, Any]) -> str:
    return str((query.get("from") or {}).get("id") or "")


def verify(secret: str, headers: Mapping[str, str]) -> bool:
    given = headers.get("x-telegram-bot-api-secret-token", "")
    return bool(given) and hmac.compare_digest(given.encode(), secret.encode())


# ---------------------------------------------------------------- messages
def escape(text: str) -> str:
    """Telegram HTML: ``<``, ``>`` and ``&`` as entities (quotes need none outside tags)."""
    return html.escape(text, quote=False)


def _pre(lines: Sequence[str]) -> str:
    """One ``<pre>`` block within Telegram's 4096 characters, counted after escaping."""
    raw = "\n".join(line for line in lines if line)
    limit = TEXT_MAX - 100
    shown = escape(cut(raw, limit))
    while len(shown) > TEXT_MAX - 100:
        limit = limit * 3 // 4
        shown = escape(cut(raw, limit))
    return f"<pre>{shown}</pre>"


def prompt_text(out: Outgoing) -> str:
    req = out.request
    lines = [message.title(req, out.kind), message.question(req) or ""]
    lines += [f"• {line}" for line in message.call_lines(req, out.redact)]
    lines.append(message.context_line(req))
    if not out.page_url:
        lines.append(message.cli_hint(req))
    return _pre(lines)


def outcome_text(out: Outgoing) -> str:
    req = out.request
    lines = [message.title(req), message.outcome(req)]
    lines += [f"• {line}" for line in message.call_lines(req, out.redact)]
    return _pre(lines)


def keyboard(out: Outgoing, secret: str) -> list[list[dict[str, str]]]:
    """Rows of buttons: the choices, Approve / Reject, Open."""
    req = out.request
    offer = message.choices(req)
    rows: list[list[dict[str, str]]] = []
    for i, answer in enumerate(offer.answers):
        rows.append([{"text": cut(answer, 60), "callback_data": seal(secret, f"c{i}", req.id)}])
    decide = []
    if offer.approve:
        decide.append({"text": "Approve", "callback_data": seal(secret, "a", req.id)})
    if offer.reject:
        label = "Decline" if req.kind == "inquiry" else "Reject"
        decide.append({"text": label, "callback_data": seal(secret, "r", req.id)})
    if decide:
        rows.append(decide)
    if out.page_url:
        rows.append([{"text": "Open", "url": out.page_url}])
    return rows


class TelegramChannel:
    """Telegram bot messages with inline keyboards; callbacks behind the webhook secret."""

    name = "telegram"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: TelegramConfig) -> None:
        self.config = config
        self.replays = ReplayGuard()

    def ready(self) -> str | None:
        try:
            import cryptography  # noqa: F401  (the button tokens; comes with signoff[server])
        except ImportError:
            return "the Telegram channel needs the cryptography package: signoff[server]"
        return missing_secrets(self.config, "channels.telegram")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        return [Target(p.telegram, p.id) for p in people if p.telegram]

    # ------------------------------------------------------------ outbound
    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        body: dict[str, Any] = {
            "chat_id": out.target.address,
            "text": prompt_text(out),
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": True},
        }
        rows = keyboard(out, self.config.webhook_secret.value())
        if rows:
            body["reply_markup"] = {"inline_keyboard": rows}
        result = await self.call(http, "sendMessage", body)
        chat = result.get("chat") if isinstance(result, dict) else None
        return {
            "chat_id": (chat or {}).get("id", out.target.address),
            "message_id": result.get("message_id") if isinstance(result, dict) else None,
        }

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        body: dict[str, Any] = {
            "chat_id": ref.get("chat_id"),
            "message_id": ref.get("message_id"),
            "text": outcome_text(out),
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": True},
        }
        if out.page_url:  # without reply_markup the keyboard is removed
            body["reply_markup"] = {"inline_keyboard": [[{"text": "Open", "url": out.page_url}]]}
        try:
            await self.call(http, "editMessageText", body)
        except DeliveryError as exc:
            if "message is not modified" not in str(exc):
                raise

    async def call(self, http: httpx.AsyncClient, method: str, body: dict[str, Any]) -> Any:
        """One Bot API call; errors are ``{"ok": false, "error_code", "description",
        "parameters": {"retry_after"}}`` (429 waits that long)."""
        token = self.config.bot_token.value()
        response = await http_request(
            http,
            "POST",
            f"{self.config.api_url}/bot{token}/{method}",
            what=f"telegram {method}",
            json=body,
            ok=frozenset({400, 403, 429}),
        )
        try:
            data = response.json()
        except ValueError:
            raise DeliveryError(f"telegram {method}: not JSON", retryable=True) from None
        if isinstance(data, dict) and data.get("ok"):
            return data.get("result")
        data = data if isinstance(data, dict) else {}
        wait = (data.get("parameters") or {}).get("retry_after")
        raise DeliveryError(
            f"telegram {method}: {cut(str(data.get('description') or response.status_code), 200)}",
            retryable=response.status_code == 429,
            retry_after=float(wait) if isinstance(wait, int | float) else None,
        )

    async def _say(self, method: str, body: dict[str, Any]) -> None:
        """A best-effort answer from inside a callback (the decision never depends on it)."""
        import httpx

        try:
            async with httpx.AsyncClient(timeout=5.0, verify=tls()) as http:
                await self.call(http, method, body)
        except DeliveryError as exc:
            log.warning("could not answer on Telegram: %s", exc)

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        if not verify(self.config.webhook_secret.value(), inbound.headers):
            return Reply(401, {"error": "invalid X-Telegram-Bot-Api-Secret-Token"})
        try:
            update = json.loads(inbound.body)
        except ValueError:
            return Reply(400, {"error": "expected a JSON Update"})
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            return Reply(400, {"error": "update_id: expected an integer"})
        # A 2xx stops Telegram's redelivery, so a replay is answered 200 and ignored.
        if not self.replays.first_time(f"telegram:{update['update_id']}", inbound.now):
            return Reply(200, {"result": "replayed"})
        query = update.get("callback_query")
        if isinstance(query, dict):
            return Reply(200, {"result": await self._clicked(query, gate)})
        msg = update.get("message")
        if isinstance(msg, dict):
            return Reply(200, {"result": await self._message(msg, gate)})
        return Reply(200, {"result": "ignored"})

    async def _clicked(self, query: dict[str, Any], gate: GateHandle) -> str:
        user = person_id(query)
        answer: dict[str, Any] = {"callback_query_id": str(query.get("id") or "")}
        person = person_by(gate, "telegram", user)
        opened = unseal(self.config.webhook_secret.value(), query.get("data"))
        if person is None:
            await self._say("answerCallbackQuery", {**answer, "text": cut(_unknown(user), 200),
                                                    "show_alert": True})  # fmt: skip
            return "unknown user"
        if opened is None:
            await self._say("answerCallbackQuery", {**answer, "text": "This button is not valid."})
            return "refused"
        action, request_id = opened
        if action == "r":
            return await self._ask_reason(query, gate, request_id, person, answer)
        if action.startswith("c"):
            result = await answer_by_choice(gate, request_id, person, action[1:], channel=self.name)
        elif action == "a":
            result = await decide_as(gate, request_id, person, "approve", channel=self.name)
        else:
            await self._say("answerCallbackQuery", {**answer, "text": "Unknown action."})
            return "refused"
        shown = {**answer, "text": cut(result.text, 200), "show_alert": not result.ok}
        await self._say("answerCallbackQuery", shown)
        return "decided" if result.ok else "refused"

    async def _ask_reason(
        self,
        query: dict[str, Any],
        gate: GateHandle,
        request_id: str,
        person: str,
        answer: dict[str, Any],
    ) -> str:
        allowed = await may_act(gate, request_id, person)
        if not allowed.ok or allowed.request is None:
            text = cut(allowed.text, 200)
            await self._say("answerCallbackQuery", {**answer, "text": text, "show_alert": True})
            return "refused"
        await self._say("answerCallbackQuery", {**answer, "text": "Reply with the reason."})
        chat = ((query.get("message") or {}).get("chat") or {}).get("id") or person_id(query)
        title = message.title(allowed.request)
        await self._say(
            "sendMessage",
            {
                "chat_id": chat,
                # The request id leads the text: the reply is matched on it (REASON_PROMPT).
                "text": f"Reject {request_id}\n<code>{escape(cut(title, 300))}</code>\n"
                "Reply to this message with the reason (the agent sees it).",
                "parse_mode": "HTML",
                "reply_markup": {"force_reply": True, "input_field_placeholder": "Why?"},
            },
        )
        return "asked reason"

    async def _message(self, msg: dict[str, Any], gate: GateHandle) -> str:
        sender = msg.get("from") or {}
        user = str(sender.get("id") or "")
        chat = (msg.get("chat") or {}).get("id") or user
        text = str(msg.get("text") or "")
        replied = msg.get("reply_to_message") or {}
        prompt = REASON_PROMPT.match(str(replied.get("text") or ""))
        if prompt and (replied.get("from") or {}).get("is_bot"):
            return await self._reason(gate, user, chat, prompt.group(1), text)
        if text.startswith("/start"):
            reply = self._onboarding(gate, user, text.removeprefix("/start").strip())
        elif (msg.get("chat") or {}).get("type") == "private":
            reply = _linked(user, person_by(gate, "telegram", user))
        else:
            return "ignored"  # chatter in a group the bot was added to
        await self._say("sendMessage", {"chat_id": chat, "text": reply})
        return "onboarded"

    async def _reason(
        self, gate: GateHandle, user: str, chat: object, request_id: str, reason: str
    ) -> str:
        person = person_by(gate, "telegram", user)
        if person is None:
            await self._say("sendMessage", {"chat_id": chat, "text": _unknown(user)})
            return "unknown user"
        result = await decide_as(
            gate, request_id, person, "reject", channel=self.name, message=reason.strip() or None
        )
        await self._say("sendMessage", {"chat_id": chat, "text": result.text})
        return "decided" if result.ok else "refused"

    def _onboarding(self, gate: GateHandle, user: str, code: str) -> str:
        linked = person_by(gate, "telegram", user)
        if linked is not None or not code:
            return _linked(user, linked)
        secret = self.config.webhook_secret.value()
        for pid in gate.policy.people:
            if hmac.compare_digest(link_code(secret, pid), code):
                return (
                    f"Your Telegram user id is {user}. To get approval requests here as {pid}, "
                    f"ask your signoff admin to add `telegram: {user}` to {pid} in people: of "
                    "signoff.yaml."
                )
        return _linked(user, None)


def _linked(user: str, person: str | None) -> str:
    if person is not None:
        return f"You are linked to signoff as {person}. Approval requests for you arrive here."
    return _unknown(user)


def _unknown(user: str) -> str:
    return (
        f"Your Telegram user id is {user}; it is not linked to a signoff approver. Ask your "
        f"signoff admin to add `telegram: {user}` to your entry in people: of signoff.yaml."
    )
