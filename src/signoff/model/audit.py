"""Audit events: every tool-call attempt and every step of an approval's life."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from signoff.model.calls import utcnow

AuditEventType = Literal[
    "allowed",  # a call ran without review (policy allow)
    "denied",  # schema, validator or policy said no
    "created",  # an approval request was stored
    "notified",  # approvers were told (per channel)
    "decided",  # one human decision was recorded
    "auto_approved",  # a thread grant approved a call without asking
    "escalated",  # the request was escalated to more approvers
    "resolved",  # every call of the request has an outcome
    "expired",  # the deadline passed
    "cancelled",  # someone cancelled the request
    "executing",  # an approved call started (exactly-once ledger)
    "executed",  # it finished
    "failed",  # it raised
    "notification_failed",  # a channel gave up
    "quarantined",  # the stored request could not be read; it is set aside (never fatal)
    "edit_rerouted",  # an edit moved a call to another rule; it waits for that rule's approvers
    "grant_created",  # a standing approval (or refusal) was created
    "grant_revoked",  # ... revoked before its expiry
    "grant_expired",  # ... reached its expiry
    "reattached",  # a restarted agent took over an open request whose waiter's lease lapsed
    "reconciled",  # a human recorded the outcome of an interrupted execution
    "intent_checked",  # an intent judge answered about a call (verdict, reason, latency)
    "stage_started",  # a call's approval chain moved to (or restarted at) a stage
    "fallback_asked",  # an inquiry nobody answered in time was handed to its fallback judge
    "fallback_failed",  # ... and the judge gave no valid answer: it stays with the humans
]


@dataclass(slots=True)
class AuditEvent:
    """One audit entry before it is written. The store adds ``seq`` and the hash chain."""

    event: AuditEventType
    at: datetime = field(default_factory=utcnow)
    request_id: str | None = None
    thread: str | None = None
    tool: str | None = None
    tool_call_id: str | None = None
    actor: str | None = None
    principal: str | None = None
    agent: str | None = None
    rule: str | None = None
    policy_hash: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """A written audit row: the event, its sequence number and its place in the hash chain."""

    seq: int
    event: str
    at: datetime
    request_id: str | None
    thread: str | None
    tool: str | None
    tool_call_id: str | None
    actor: str | None
    principal: str | None
    agent: str | None
    rule: str | None
    policy_hash: str | None
    data: dict[str, Any]
    prev_hash: str
    hash: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "event": self.event,
            "at": self.at.isoformat(),
            "request_id": self.request_id,
            "thread": self.thread,
            "tool": self.tool,
            "tool_call_id": self.tool_call_id,
            "actor": self.actor,
            "principal": self.principal,
            "agent": self.agent,
            "rule": self.rule,
            "policy_hash": self.policy_hash,
            "data": self.data,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True, slots=True)
class AuditVerification:
    """Result of walking the hash chain: ``ok``, rows checked, and the first broken row."""

    ok: bool
    checked: int
    broken_seq: int | None = None
    problem: str | None = None
