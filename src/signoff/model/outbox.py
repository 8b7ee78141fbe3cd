"""The notification outbox's rows: the messages a request's changes send, one per channel
and recipient. Stored by the store (``store/base.py`` says how they are claimed and sent);
here because a :class:`~signoff.model.resolution.Transition` carries the rows its commit
stores with it, as it carries its audit events and grants."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from signoff.model.calls import utcnow

OutboxKind = Literal["prompt", "reminder", "escalation", "update", "event"]
OutboxStatus = Literal["pending", "sending", "sent", "failed", "cancelled"]
OutboxOutcome = Literal["sent", "failed", "cancelled"]

#: Messages that ask a human for a decision: pointless (and misleading) once the request
#: is decided, so they are cancelled then. Updates and events are facts: they still go out.
PROMPT_KINDS: tuple[OutboxKind, ...] = ("prompt", "reminder", "escalation")


@dataclass(slots=True)
class OutboxItem:
    """One message to send through one channel: a row of the notification outbox.

    ``id`` is deterministic (request, kind, channel, recipient), so writing the same item
    twice — a retried escalation, a decision racing a send — stores it once. It is also the
    provider's idempotency key (``webhook-id``, LINE retry key, Discord nonce, Message-ID).
    ``ref`` is what the provider answered (Slack ``channel``+``ts``, a Discord message id),
    kept so the message can be updated when the request resolves.
    """

    id: str
    request_id: str
    channel: str
    kind: OutboxKind
    recipient: str
    next_at: datetime
    person: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    status: OutboxStatus = "pending"
    attempts: int = 0
    created_at: datetime = field(default_factory=utcnow)
    lease_until: datetime | None = None
    ref: dict[str, Any] | None = None
    error: str | None = None
