"""Feishu / Lark: an interactive card with buttons, decided by a ``card.action.trigger``
callback.

**Provider side**: a custom app (Feishu: open.feishu.cn, Lark: open.larksuite.com) with the
bot capability and the ``im:message:send_as_bot`` permission; under *Events & callbacks*
an Encrypt Key and the Verification Token, the callback request URL
``https://<your server>/hooks/feishu`` and the ``card.action.trigger`` callback. Config:
``channels.feishu: {app_id, app_secret, verification_token, encrypt_key, domain}``;
``people.<id>.feishu`` is the person's ``open_id`` in this app (``ou_…``).

**Out**: ``POST /open-apis/im/v1/messages?receive_id_type=open_id`` with a card (JSON 1.0,
``update_multi``) under a ``tenant_access_token`` (cached). The message's ``uuid`` is the
outbox row id, so a retried send is deduplicated by Feishu (within its one-hour window).
Agent text goes into ``lark_md`` escaped (every markdown and mention character as an HTML
entity) or into ``plain_text``. When the request resolves, ``PATCH
/open-apis/im/v1/messages/{id}`` replaces every copy with the outcome.

**In** (``POST /hooks/feishu``): ``encrypt_key`` is required. ``X-Lark-Signature`` = hex
SHA-256 of ``X-Lark-Request-Timestamp + X-Lark-Request-Nonce + encrypt_key + raw body``,
compared in constant time, the timestamp within 5 minutes, each ``header.event_id`` once;
the body is ``{"encrypt": …}``: AES-256-CBC under SHA-256(encrypt_key), IV first. The
``url_verification`` challenge carries no signature: it is answered only when it decrypts
under the key and its ``token`` is the Verification Token. The clicker is
``event.operator.open_id``, mapped through ``people:``; the answer (within Feishu's 3 s) is a
toast and, once decided, the outcome card.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import DeliveryError, Inbound, Outgoing, Reply, Target, message
from signoff.channels._apptoken import CachedToken, token_in
from signoff.channels._http import request as http_request
from signoff.channels.config import FeishuConfig, missing_secrets
from signoff.channels.inbound import (
    FRESHNESS_S,
    ReplayGuard,
    answer_by_choice,
    decide_as,
    fresh,
    page_url,
    person_by,
)
from signoff.channels.redact import Redactor, cut

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind

log = logging.getLogger("signoff.channels.feishu")

RATE_LIMITED = 99991400
BAD_TOKEN = frozenset({99991661, 99991663, 99991668})
#: Markdown, mention and link characters of ``lark_md``, written as numeric entities.
_LARK_MD = str.maketrans({c: f"&#{ord(c)};" for c in "&<>*_~`[]()#+-!|\\{}:@$"})


# ---------------------------------------------------------------- security
def signature(encrypt_key: str, timestamp: str, nonce: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def verify(encrypt_key: str, headers: Mapping[str, str], body: bytes, now: float) -> bool:
    ts = headers.get("x-lark-request-timestamp", "")
    nonce = headers.get("x-lark-request-nonce", "")
    given = headers.get("x-lark-signature", "")
    if not ts.isdigit() or not given or not fresh(ts, now, FRESHNESS_S):
        return False
    return hmac.compare_digest(signature(encrypt_key, ts, nonce, body), given)


def decrypt(encrypt_key: str, encrypted: str) -> bytes:
    """Feishu's callback encryption; raises ValueError when it is not ours."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("encrypt: not base64") from None
    if len(raw) < 32 or len(raw) % 16:
        raise ValueError("encrypt: wrong length")
    key = hashlib.sha256(encrypt_key.encode()).digest()
    decryptor = Cipher(algorithms.AES(key), modes.CBC(raw[:16])).decryptor()
    padded = decryptor.update(raw[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


# ---------------------------------------------------------------- cards
def escape(text: str) -> str:
    """Text for ``lark_md`` that renders as itself: no emphasis, link, mention or tag."""
    return text.translate(_LARK_MD)


def _plain(text: str) -> dict[str, str]:
    return {"tag": "plain_text", "content": text}


def _button(label: str, kind: str, value: dict[str, str]) -> dict[str, Any]:
    return {"tag": "button", "text": _plain(label), "type": kind, "value": value}


def _card(head: str, template: str, lines: Sequence[str], note: str | None,
          actions: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    elements: list[dict[str, Any]] = []
    if lines:
        body = "\n".join(f"• {escape(line)}" for line in lines)
        elements.append({"tag": "div", "text": {"tag": "lark_md", "content": cut(body, 4000)}})
    if note:
        elements.append({"tag": "note", "elements": [_plain(cut(note, 500))]})
    if actions:
        elements.append({"tag": "action", "actions": actions})
    return {
        "config": {"wide_screen_mode": True, "update_multi": True},
        "header": {"template": template, "title": _plain(cut(head, 100))},
        "elements": elements,
    }


def prompt_card(out: Outgoing) -> dict[str, Any]:
    req = out.request
    lines = [q for q in (message.question(req),) if q] + message.call_lines(req, out.redact)
    note = message.context_line(req) + ("" if out.page_url else " · " + message.cli_hint(req))
    offer = message.choices(req)
    actions = [
        _button(cut(answer, 40), "default", {"a": "respond", "r": req.id, "c": str(i)})
        for i, answer in enumerate(offer.answers)
    ]
    if offer.approve:
        actions.append(_button("Approve", "primary", {"a": "approve", "r": req.id}))
    if offer.reject:
        label = "Decline" if req.kind == "inquiry" else "Reject"
        actions.append(_button(label, "danger", {"a": "reject", "r": req.id}))
    if out.page_url:
        actions.append({"tag": "button", "text": _plain("Open"), "type": "default",
                        "url": out.page_url})  # fmt: skip
    return _card(message.title(req, out.kind), "orange", lines, note, actions)


def outcome_card(out: Outgoing) -> dict[str, Any]:
    req = out.request
    actions = []
    if out.page_url:
        actions.append({"tag": "button", "text": _plain("Open"), "type": "default",
                        "url": out.page_url})  # fmt: skip
    lines = message.call_lines(req, out.redact)
    return _card(message.title(req), "grey", lines, message.outcome(req), actions)


class FeishuChannel:
    """Feishu / Lark interactive cards; signed and encrypted card callbacks."""

    name = "feishu"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: FeishuConfig) -> None:
        self.config = config
        self.replays = ReplayGuard()
        self.token = CachedToken(self._fetch_token)

    def ready(self) -> str | None:
        try:
            import cryptography  # noqa: F401  (callback decryption; signoff[server])
        except ImportError:
            return "the Feishu channel needs the cryptography package: signoff[server]"
        return missing_secrets(self.config, "channels.feishu")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        return [Target(p.feishu, p.id) for p in people if p.feishu]

    # ------------------------------------------------------------ outbound
    async def _fetch_token(self, http: httpx.AsyncClient) -> tuple[str, float]:
        data = await self._api(
            http,
            "POST",
            "/open-apis/auth/v3/tenant_access_token/internal",
            {"app_id": self.config.app_id, "app_secret": self.config.app_secret.value()},
            auth=False,
        )
        return token_in(data, "tenant_access_token", "expire", "feishu")

    async def _api(
        self,
        http: httpx.AsyncClient,
        method: str,
        path: str,
        body: dict[str, Any],
        *,
        auth: bool = True,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One Open API call; errors are ``{"code": N, "msg": …}`` (0 is success)."""
        headers = {"Authorization": f"Bearer {await self.token.get(http)}"} if auth else {}
        what = f"feishu {method} {path.split('/open-apis/')[-1]}"
        response = await http_request(
            http, method, f"{self.config.base_url}{path}", what=what, json=body,
            headers=headers, params=params, ok=frozenset({400, 401, 403, 429}),
        )  # fmt: skip
        try:
            data = response.json()
        except ValueError:
            raise DeliveryError(f"{what}: not JSON", retryable=True) from None
        if not isinstance(data, dict):
            raise DeliveryError(f"{what}: not a JSON object", retryable=True)
        code = data.get("code")
        if code == 0:
            return data
        if code in BAD_TOKEN:
            self.token.clear()
        raise DeliveryError(
            f"{what}: code {code}: {cut(str(data.get('msg')), 200)}",
            retryable=response.status_code == 429 or code == RATE_LIMITED or code in BAD_TOKEN,
        )

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        data = await self._api(
            http,
            "POST",
            "/open-apis/im/v1/messages",
            {
                "receive_id": out.target.address,
                "msg_type": "interactive",
                "content": json.dumps(prompt_card(out), ensure_ascii=False),
                "uuid": out.key,  # Feishu drops a second send with the same uuid (1 h)
            },
            params={"receive_id_type": "open_id"},
        )
        return {"message_id": (data.get("data") or {}).get("message_id")}

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        await self._api(
            http,
            "PATCH",
            f"/open-apis/im/v1/messages/{ref.get('message_id')}",
            {"content": json.dumps(outcome_card(out), ensure_ascii=False)},
        )

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        key = self.config.encrypt_key.value()
        signed = "x-lark-signature" in inbound.headers
        if signed and not verify(key, inbound.headers, inbound.body, inbound.now):
            return Reply(401, {"error": "bad or stale X-Lark-Signature"})
        try:
            outer = json.loads(inbound.body)
            event = json.loads(decrypt(key, str(outer["encrypt"])))
        except (ValueError, KeyError, TypeError):
            return Reply(401, {"error": "expected a body encrypted with the encrypt_key"})
        if not isinstance(event, dict):
            return Reply(400, {"error": "expected a JSON object"})
        token = self.config.verification_token.value()
        if event.get("type") == "url_verification":
            if not hmac.compare_digest(str(event.get("token") or "").encode(), token.encode()):
                return Reply(401, {"error": "token: not the verification token"})
            return Reply(200, {"challenge": str(event.get("challenge") or "")})
        if not signed:  # only the URL check comes unsigned
            return Reply(401, {"error": "missing X-Lark-Signature"})
        found = event.get("header")
        header: dict[str, Any] = found if isinstance(found, dict) else {}
        if not hmac.compare_digest(str(header.get("token") or "").encode(), token.encode()):
            return Reply(401, {"error": "header.token: not the verification token"})
        if header.get("event_type") != "card.action.trigger":
            return Reply(200, {})
        if not self.replays.first_time(f"feishu:{header.get('event_id')}", inbound.now):
            return Reply(200, _toast("info", "This click was already processed."))
        return await self._clicked(event.get("event") or {}, gate)

    async def _clicked(self, event: dict[str, Any], gate: GateHandle) -> Reply:
        user = str((event.get("operator") or {}).get("open_id") or "")
        person = person_by(gate, "feishu", user)
        if person is None:
            return Reply(200, _toast("error", _unknown(user)))
        value = (event.get("action") or {}).get("value")
        value = value if isinstance(value, dict) else {}
        action, request_id = value.get("a"), str(value.get("r") or "")
        if action == "respond":
            choice = value.get("c")
            result = await answer_by_choice(gate, request_id, person, choice, channel=self.name)
        elif action == "approve":
            result = await decide_as(gate, request_id, person, "approve", channel=self.name)
        elif action == "reject":
            result = await decide_as(gate, request_id, person, "reject", channel=self.name)
        else:
            return Reply(200, _toast("error", "Unknown action."))
        if not result.ok:
            return Reply(200, _toast("error", result.text))
        reply = _toast("success", result.text)
        if result.request is not None and not result.request.pending:
            redact = Redactor.from_policy(gate.policy)
            link = page_url(gate, request_id)
            shown = Outgoing("update", result.request, Target(user, person), "", redact, link)
            reply["card"] = {"type": "raw", "data": outcome_card(shown)}
        return Reply(200, reply)


def _toast(kind: str, text: str) -> dict[str, Any]:
    return {"toast": {"type": kind, "content": cut(text, 200)}}


def _unknown(user: str) -> str:
    return (
        f"Your Feishu open_id ({user}) is not linked to a signoff approver. Ask an admin to "
        f"add `feishu: {user}` to your entry in people: of signoff.yaml."
    )
