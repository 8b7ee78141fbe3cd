"""Generic webhooks, signed per Standard Webhooks (standardwebhooks.com, spec v1).

**Out**: each subscriber in ``channels.webhooks`` gets ``approval.created``,
``approval.decided``, ``approval.expired``, ``approval.cancelled``, ``approval.escalated``
and ``approval.edit_rerouted`` events (those in its ``events`` list) — the way an agent platform
learns it can resume a paused graph — and ``approval.grant_created`` (an
approval that also created a grant; ``data.grant_ids``), ``approval.reattached``,
``approval.reconciled``, and ``approval.stage_started`` (an approval chain moved to its next
stage, or an edit restarted it; ``calls[].stage`` and ``calls[].progress``). Headers:
``webhook-id`` (the outbox row id, the same on every retry: the subscriber's dedupe key),
``webhook-timestamp`` (this attempt, unix seconds) and
``webhook-signature: v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>``.
410 Gone means the subscriber is gone: no more attempts.

**In**: ``POST /hooks/webhook`` takes a decision from a caller signing with one of the
configured secrets: ``{"request_id", "approver", "decisions": [...]}`` (full decision
objects, edits included) or ``{"request_id", "approver", "action": "approve", "message"}``.
The signature, a ±5 minute timestamp window and ``webhook-id`` dedupe come first; the
gate then checks the approver like any other.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from signoff.channels import DeliveryError, Inbound, Outgoing, Reply, Target, message
from signoff.channels._http import request as http_request
from signoff.channels.config import WebhookConfig, missing_secrets
from signoff.channels.inbound import FRESHNESS_S, ReplayGuard, decidable, fresh
from signoff.model import (
    AlreadyDecided,
    ApprovalRequest,
    DecisionError,
    NotAuthorized,
    NotFound,
    PolicyError,
    SignoffError,
    chains,
)

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind


# ---------------------------------------------------------------- the scheme
def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret."""
    try:
        return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (binascii.Error, ValueError):
        raise PolicyError(
            "a webhook secret is 'whsec_' followed by base64 (24–64 random bytes); "
            'make one with: python -c "import base64,os; '
            "print('whsec_'+base64.b64encode(os.urandom(32)).decode())\""
        ) from None


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 signature>`` over ``{msg_id}.{timestamp}.{body}``."""
    mac = hmac.new(secret_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify(
    secrets: Iterable[str],
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    tolerance_s: float = FRESHNESS_S,
) -> bool:
    """True when a ``v1`` signature matches one of ``secrets`` (key rotation) inside the
    timestamp window. Malformed input is False, never an exception."""
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, ts, given = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not (msg_id and ts and given) or not ts.isdigit() or not fresh(ts, now, tolerance_s):
        return False
    try:
        expected = [sign(s, msg_id, int(ts), body).partition(",")[2] for s in secrets]
    except PolicyError:
        return False
    for item in given.split():
        version, _, signature = item.partition(",")
        if version == "v1" and any(hmac.compare_digest(signature, e) for e in expected):
            return True
    return False


# ---------------------------------------------------------------- payloads
def payload(req: ApprovalRequest, event: str, out: Outgoing) -> dict[str, Any]:
    """The event body: the request's state with arguments redacted (fetch the full request
    from the API with a token)."""
    calls = []
    for action, call in zip(req.action_requests, req.calls, strict=True):
        entry: dict[str, Any] = {
            "tool_call_id": action.tool_call_id,
            "tool": action.name,
            "args": out.redact.value(action.args),
            "rule": action.rule,
            "resolution": call.resolution,
            "resolved_by": call.resolved_by,
            "message": call.message,
        }
        if call.action.args != action.args:  # edited, maybe still waiting for a quorum
            entry["edited_args"] = out.redact.value(call.action.args)
        cfg = req.config(action.tool_call_id)
        if cfg.approvers.chained:  # an approval chain: which stage, how far
            entry["stage"] = call.stage
            entry["progress"] = chains.progress(cfg, call)
        calls.append(entry)
    data: dict[str, Any] = {
        "request_id": req.id,
        "kind": req.kind,
        "status": req.status,
        "thread": req.thread,
        "agent": req.agent,
        "principal": req.principal.id,
        "created_at": req.created_at.isoformat(),
        "expires_at": req.expires_at.isoformat(),
        "resolved_at": req.resolved_at.isoformat() if req.resolved_at else None,
        "summary": message.outcome(req) if req.terminal else message.title(req),
        "calls": calls,
        "url": out.page_url,
    }
    if req.inquiry is not None:
        data["question"] = req.inquiry.question
        data["choices"] = req.inquiry.choices
    if event == "grant_created":  # the standing approvals the request's approvals created
        data["grant_ids"] = [d.grant_id for d in req.decisions if d.grant_id]
    return {
        "type": f"approval.{event}",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "data": data,
    }


class WebhookChannel:
    """Standard Webhooks out (events) and in (signed decisions)."""

    name = "webhooks"
    kinds = frozenset({"event"})
    personal_links = False

    def __init__(self, subscribers: Sequence[WebhookConfig]) -> None:
        self.subscribers = list(subscribers)
        self.replays = ReplayGuard()

    def ready(self) -> str | None:
        for i, sub in enumerate(self.subscribers):
            why = missing_secrets(sub, f"channels.webhooks[{i}]")
            if why:
                return why
        return None

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind != "event" or event is None:
            return []
        return [Target(s.url) for s in self.subscribers if event in s.events]

    def _subscriber(self, url: str) -> WebhookConfig:
        for sub in self.subscribers:
            if sub.url == url:
                return sub
        raise DeliveryError(f"no webhook subscriber {url} in the config any more", retryable=False)

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        sub = self._subscriber(out.target.address)
        body = json.dumps(
            payload(out.request, out.event or "created", out), separators=(",", ":")
        ).encode()
        now = int(datetime.now(UTC).timestamp())
        headers = {
            "content-type": "application/json",
            "webhook-id": out.key,
            "webhook-timestamp": str(now),
            "webhook-signature": sign(sub.secret.value(), out.key, now, body),
        }
        await http_request(http, "POST", sub.url, what="webhook", content=body, headers=headers)
        return None

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        return None  # subscribers get decided/expired events instead

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        secrets = [s.secret.value() for s in self.subscribers]
        if not verify(secrets, inbound.headers, inbound.body, inbound.now):
            return Reply(401, {"error": "bad or missing Standard Webhooks signature"})
        msg_id = inbound.headers.get("webhook-id", "")
        if not self.replays.first_time(f"webhook:{msg_id}", inbound.now):
            return Reply(409, {"error": f"webhook-id {msg_id} was already processed"})
        try:
            body = json.loads(inbound.body)
            request_id, approver, decisions = _parse(body)
        except (ValueError, TypeError) as exc:
            return Reply(400, {"error": str(exc)})
        try:
            if (
                decisions
                and all("tool_call_id" not in d for d in decisions)
                and len(decisions) == 1
            ):
                decisions = await _for_every_call(gate, request_id, approver, decisions[0])
            req = await gate.adecide(request_id, decisions, approver=approver, channel="webhook")
        except SignoffError as exc:
            return Reply(_status(exc), {"error": str(exc)})
        return Reply(
            200, {"request_id": req.id, "status": req.status, "summary": message.outcome(req)}
        )


async def _for_every_call(
    gate: GateHandle, request_id: str, approver: str, decision: dict[str, Any]
) -> list[dict[str, Any]]:
    """One unkeyed decision answers every call the approver may decide (like a link)."""
    req = await gate.get(request_id)
    calls = decidable(req, approver, gate.policy.roles_of(approver))
    calls = calls or req.pending_call_ids or [c.tool_call_id for c in req.calls]
    return [{**decision, "tool_call_id": c} for c in calls]


def _parse(body: object) -> tuple[str, str, list[dict[str, Any]]]:
    if not isinstance(body, dict):
        raise ValueError("the body is a JSON object {request_id, approver, decisions|action}")
    request_id, approver = body.get("request_id"), body.get("approver")
    if not isinstance(request_id, str) or not request_id:
        raise ValueError("request_id: required")
    if not isinstance(approver, str) or not approver:
        raise ValueError("approver: required (a person from people:)")
    decisions = body.get("decisions")
    if decisions is None:
        action = body.get("action")
        if action not in ("approve", "reject", "respond"):
            raise ValueError("give decisions: [...] or action: approve|reject|respond")
        decisions = [{"type": action, "message": body.get("message")}]
        return request_id, approver, decisions
    if not isinstance(decisions, list) or not all(isinstance(d, dict) for d in decisions):
        raise ValueError("decisions: a list of decision objects")
    return request_id, approver, decisions


def _status(exc: SignoffError) -> int:
    if isinstance(exc, AlreadyDecided):
        return 409
    if isinstance(exc, NotAuthorized):
        return 403
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, DecisionError):
        return 400
    return 400
