"""The notification outbox in memory: :class:`MemoryStore`'s, and the gate's stand-in for a
store without a durable outbox (then notifications do not survive a restart).

Every method takes the lock it is given, so the memory store can share its own lock and
write a request and its outbox rows as one step.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from signoff.model import AuditEvent
from signoff.store.base import PROMPT_KINDS, OutboxItem, OutboxOutcome


class MemoryOutbox:
    """Outbox rows in a dict; every operation is atomic under one lock."""

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self._lock = lock or threading.Lock()
        self._rows: dict[str, OutboxItem] = {}

    def add_locked(self, items: Sequence[OutboxItem]) -> int:
        """Insert-or-ignore; the caller holds the lock (used inside ``create_request``)."""
        added = 0
        for item in items:
            if item.id not in self._rows:
                self._rows[item.id] = replace(item, data=dict(item.data))
                added += 1
        return added

    async def enqueue_outbox(self, items: Sequence[OutboxItem]) -> int:
        with self._lock:
            return self.add_locked(items)

    async def claim_outbox(
        self,
        now: datetime,
        *,
        limit: int = 50,
        lease_s: float = 60.0,
        channels: Collection[str] | None = None,
    ) -> list[OutboxItem]:
        with self._lock:
            due = sorted(
                (r for r in self._rows.values() if _due(r, now, channels)),
                key=lambda r: (r.next_at, r.id),
            )[:limit]
            for row in due:
                row.status = "sending"
                row.attempts += 1
                row.lease_until = now + timedelta(seconds=lease_s)
            return [_copy(r) for r in due]

    async def complete_outbox(
        self,
        item_id: str,
        *,
        status: OutboxOutcome = "sent",
        ref: dict[str, Any] | None = None,
        error: str | None = None,
        audit: Sequence[AuditEvent] = (),
    ) -> None:
        with self._lock:
            if audit:  # first: if it cannot be written, the row stays as it was
                self._audit_locked(audit)
            row = self._rows.get(item_id)
            if row is not None:
                row.status = status
                row.lease_until = None
                row.ref = dict(ref) if ref is not None else None
                row.error = error

    def _audit_locked(self, events: Sequence[AuditEvent]) -> None:
        """Append ``events`` to the audit log, the lock held: the store's (MemoryStore); a
        stand-in outbox has none (its worker appends to the store on its own)."""
        raise TypeError("this outbox has no audit log: append the events to the store")

    async def retry_outbox(self, item_id: str, *, next_at: datetime, error: str) -> None:
        with self._lock:
            row = self._rows.get(item_id)
            if row is None:
                return
            row.status = "pending"
            row.next_at = next_at
            row.lease_until = None
            row.error = error

    async def cancel_outbox_for(
        self, request_id: str, kinds: Collection[str] = PROMPT_KINDS
    ) -> int:
        with self._lock:
            cancelled = 0
            for row in self._rows.values():
                if row.request_id == request_id and row.status == "pending" and row.kind in kinds:
                    row.status = "cancelled"
                    cancelled += 1
            return cancelled

    async def outbox_for(self, request_id: str) -> list[OutboxItem]:
        with self._lock:
            rows = [r for r in self._rows.values() if r.request_id == request_id]
            return [_copy(r) for r in sorted(rows, key=lambda r: (r.created_at, r.id))]

    async def next_outbox_at(self, channels: Collection[str] | None = None) -> datetime | None:
        with self._lock:
            times = [
                r.next_at if r.status == "pending" else r.lease_until
                for r in self._rows.values()
                if r.status in ("pending", "sending")
                and (channels is None or r.channel in channels)
            ]
            return min((t for t in times if t is not None), default=None)


def _due(row: OutboxItem, now: datetime, channels: Collection[str] | None) -> bool:
    if channels is not None and row.channel not in channels:
        return False
    if row.status == "pending":
        return row.next_at <= now
    return row.status == "sending" and row.lease_until is not None and row.lease_until <= now


def _copy(row: OutboxItem) -> OutboxItem:
    return replace(row, data=dict(row.data), ref=dict(row.ref) if row.ref is not None else None)
