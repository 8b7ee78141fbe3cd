"""``MemoryStore``: the whole Store protocol in one process's memory.

For tests, demos and LangChain's ``interrupt_on`` shorthand, where nothing needs to outlive
the process. It keeps every rule of the protocol (first valid decision wins, idempotent
create, hash-chained audit, waiters woken after commit) so code tested against it behaves
the same on SQLite or PostgreSQL. One ``threading.Lock`` plays the write transaction.

Requests are kept as snapshots that are never changed once stored (copy on write): a request
given to ``create_request`` becomes the first snapshot (the caller hands it over); a change
copies the stored snapshot once, the mutation works on that copy, and the result becomes the
new snapshot. Readers, waiters and the caller of ``update_request`` all get the stored
snapshot itself, not a copy each — they must treat it as read-only (every function of the
state machine in ``model/resolution.py`` changes a copy, or the store's working copy with
``in_place=True``); ``copy_for_update()`` gives a request of one's own to change.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    AuditRecord,
    AuditVerification,
    IdempotencyConflict,
    NotFound,
    StoreError,
    Transition,
)
from signoff.model.grants import Grant
from signoff.store import _grants
from signoff.store._idempotency import StoredCall, existing_request_id, fingerprints
from signoff.store._outbox_memory import MemoryOutbox
from signoff.store._waiting import Listeners, Waiters, listener_event, wait_until_terminal
from signoff.store._working import working_copy
from signoff.store.audit import GENESIS_HASH, SealedRow, iso_utc, seal_rows, verify_chain
from signoff.store.base import (
    AuditQuery,
    ChangeListener,
    Mutation,
    OutboxItem,
    QuarantinedRequest,
    RequestCounts,
    StoreCheck,
)

_COUNT_BY = ("principal", "agent", "thread")

# a stored audit row (a plain tuple) as its SealedRow, and where seq and hash sit in it
_ROW = SealedRow._make
_SEQ = SealedRow._fields.index("seq")
_HASH = SealedRow._fields.index("hash")


class MemoryStore(MemoryOutbox):
    """Approval requests, the audit log and the notification outbox in memory; lost when
    the process ends."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.Lock()
        super().__init__(self._lock)  # the outbox shares the lock: one "transaction"
        self._requests: dict[str, ApprovalRequest] = {}
        # request ids by thread, in creation order: list_requests(thread=...) (the reattach
        # check on a thread's first step) reads one thread's requests, not every request
        self._by_thread: dict[str, list[str]] = {}
        # (request id, fingerprint) per (thread, call id): plain tuples of strings, which the
        # garbage collector stops tracking (see _audit)
        self._calls: dict[tuple[str, str], tuple[str, str]] = {}
        self._grants: dict[str, Grant] = {}
        self._grants_noted: set[str] = set()  # grant ids whose expiry was audited
        self._grants_version = 0
        self._salt = os.urandom(32)  # keys secret-argument digests without an audit.key
        # sealed rows as the durable stores keep them (text timestamps and data); turned into
        # AuditRecords only when read, so a write does not parse back what it just serialized.
        # Kept as plain tuples (SealedRow's fields in order): a tuple of strings, ints and None
        # is one the garbage collector stops tracking after its first pass, where a NamedTuple
        # stays tracked and every full collection walks all of them again (the store keeps
        # every row: five a cycle, most of what grows the heap besides the requests)
        self._audit: list[tuple[Any, ...]] = []
        self._queued: deque[AuditEvent] = deque()
        self._waiters = Waiters()
        self._listeners = Listeners()
        self._closed = False

    async def __aenter__(self) -> MemoryStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        if self._closed:
            return
        with self._lock:
            self._flush_locked()
            self._closed = True
        self._waiters.fail_all(StoreError(f"store {self.url} was closed while waiting"))

    # ---------------------------------------------------------------- requests
    async def create_request(
        self,
        request: ApprovalRequest,
        events: list[AuditEvent],
        outbox: Sequence[OutboxItem] = (),
    ) -> tuple[ApprovalRequest, bool]:
        prints = fingerprints(request)
        with self._lock:
            self._check_open()
            stored = {
                call_id: StoredCall._make(self._calls[(request.thread, call_id)])
                for call_id in prints
                if (request.thread, call_id) in self._calls
            }
            existing = existing_request_id(request, prints, stored)
            if existing is not None:
                return self._requests[existing], False
            if request.id in self._requests:
                raise IdempotencyConflict(
                    f"request id {request.id} is already used by other calls; use a new request id"
                )
            self._flush_locked()
            # the caller's request becomes the first snapshot: it hands it over, read-only
            self._requests[request.id] = request
            self._by_thread.setdefault(request.thread, []).append(request.id)
            for call_id, fingerprint in prints.items():
                self._calls[(request.thread, call_id)] = (request.id, fingerprint)
            self._append_locked(events)
            self.add_locked(outbox)
        if self._listeners:  # the event's name is worked out only for someone listening
            self._listeners.notify(request, listener_event([e.event for e in events], request))
        return request, True

    async def get_request(self, request_id: str) -> ApprovalRequest | None:
        with self._lock:
            self._check_open()
            return self._requests.get(request_id)  # the snapshot: read-only

    async def find_request_by_call(self, thread: str, tool_call_id: str) -> ApprovalRequest | None:
        with self._lock:
            self._check_open()
            found = self._calls.get((thread, tool_call_id))
            if found is None:
                return None
            return self._requests[found[0]]  # (request id, fingerprint)

    async def list_requests(
        self,
        *,
        status: str | None = None,
        thread: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRequest]:
        with self._lock:
            self._check_open()
            candidates = (
                self._requests.values()
                if thread is None
                else [self._requests[i] for i in self._by_thread.get(thread, ())]
            )
            chosen = [
                r
                for r in candidates
                if (thread is None or r.thread == thread)
                and (status is None or r.status == status)
                and (kind is None or r.kind == kind)
            ]
            chosen.sort(key=lambda r: (r.created_at, r.id), reverse=True)
            return chosen[offset : offset + limit]

    async def update_request(self, request_id: str, mutate: Mutation) -> Transition:
        with self._lock:
            self._check_open()
            current = self._requests.get(request_id)
            if current is None:
                raise NotFound(f"no approval request {request_id}")
            # the one copy of a change: the mutation's working copy becomes the new snapshot
            transition = mutate(working_copy(current))
            if not transition.changed:
                return transition
            new = transition.request
            if new.id != request_id:
                raise StoreError(f"a mutation turned request {request_id} into {new.id}")
            if new.version <= current.version:
                new.version = current.version + 1
            for grant in transition.grants:
                if grant.id in self._grants:
                    raise _grants.duplicate(grant.id)
            self._flush_locked()
            self._requests[request_id] = new
            self._store_grants_locked(transition.grants)
            if transition.outbox:
                self.add_locked(transition.outbox)
            self._append_locked(transition.events)
        if new.terminal:
            self._waiters.wake(new, shared=True)
        if self._listeners:
            self._listeners.notify(new, listener_event([e.event for e in transition.events], new))
        return transition

    async def due_requests(self, now: datetime, limit: int = 100) -> list[str]:
        with self._lock:
            due = sorted((r.sweep_at, r.id) for r in self._requests.values() if r.pending)
        return [request_id for due_at, request_id in due if due_at <= now][:limit]

    async def next_due_at(self) -> datetime | None:
        with self._lock:
            return min((r.sweep_at for r in self._requests.values() if r.pending), default=None)

    # ---------------------------------------------------------------- grants
    async def create_grant(self, grant: Grant, events: list[AuditEvent]) -> Grant:
        with self._lock:
            self._check_open()
            stored = self._grants.get(grant.id)
            if stored is not None:
                return _grants.same_or_conflict(stored, grant).model_copy(deep=True)
            self._flush_locked()
            self._store_grants_locked([grant])
            self._append_locked(events)
        return grant.model_copy(deep=True)

    async def revoke_grant(
        self,
        grant_id: str,
        *,
        by: str,
        reason: str | None,
        now: datetime,
        events: list[AuditEvent],
    ) -> Grant:
        with self._lock:
            self._check_open()
            stored = self._grants.get(grant_id)
            if stored is None:
                raise NotFound(f"no grant {grant_id}")
            if stored.revoked_at is None:
                stored = _grants.revoked(stored, by=by, reason=reason, now=now)
                self._flush_locked()
                self._grants[grant_id] = stored
                self._grants_version += 1
                self._append_locked(events)
            return stored.model_copy(deep=True)

    async def get_grant(self, grant_id: str) -> Grant | None:
        with self._lock:
            self._check_open()
            stored = self._grants.get(grant_id)
            return stored.model_copy(deep=True) if stored is not None else None

    async def list_grants(
        self, *, active_at: datetime | None = None, limit: int = 1000
    ) -> list[Grant]:
        with self._lock:
            self._check_open()
            chosen = [
                g
                for g in self._grants.values()
                if active_at is None or (g.revoked_at is None and g.expires_at > active_at)
            ]
        chosen.sort(key=lambda g: (g.created_at, g.id), reverse=True)
        return [g.model_copy(deep=True) for g in chosen[:limit]]

    async def grants_version(self) -> int:
        with self._lock:
            return self._grants_version

    async def redaction_salt(self) -> bytes:
        return self._salt

    async def note_expired_grants(self, now: datetime) -> list[Grant]:
        with self._lock:
            self._check_open()
            expired = sorted(
                (
                    g
                    for g in self._grants.values()
                    if g.revoked_at is None
                    and g.expires_at <= now
                    and g.id not in self._grants_noted
                ),
                key=lambda g: (g.expires_at, g.id),
            )
            if expired:
                self._flush_locked()
                self._grants_noted.update(g.id for g in expired)
                self._append_locked([_grants.expired_event(g, now) for g in expired])
        return [g.model_copy(deep=True) for g in expired]

    # Objects in memory are never unreadable: nothing is ever quarantined here, but the
    # methods answer like the durable stores' so callers need no special case.
    async def count_requests(self) -> RequestCounts:
        with self._lock:
            return RequestCounts(sum(1 for r in self._requests.values() if r.pending), 0)

    async def quarantined_requests(self, limit: int = 100) -> list[QuarantinedRequest]:
        return []

    async def cancel_quarantined(
        self, request_id: str, *, actor: str, reason: str | None = None
    ) -> QuarantinedRequest:
        with self._lock:
            known = request_id in self._requests
        if not known:
            raise NotFound(f"no approval request {request_id}")
        raise StoreError(
            f"request {request_id} is not quarantined; cancel it with `signoff cancel {request_id}`"
        )

    async def check(self) -> StoreCheck:
        report = StoreCheck(store=self.url, backend="memory", version=0, supported=0)
        report.add("memory", True, "nothing is kept after the process ends; nothing to check")
        return report

    async def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        return await wait_until_terminal(self._waiters, self.get_request, request_id, timeout)

    def add_listener(self, listener: ChangeListener) -> Callable[[], None]:
        return self._listeners.add(listener)

    # ---------------------------------------------------------------- audit
    def audit_nowait(self, event: AuditEvent) -> None:
        if self._closed:
            raise StoreError(f"store {self.url} is closed; the audit event was not recorded")
        self._queued.append(event)  # chained on the next write, flush or read

    def audit_failure(self) -> str | None:
        return None

    async def check_writable(self) -> None:
        self._check_open()

    async def append_audit(self, events: list[AuditEvent]) -> None:
        with self._lock:
            self._audit_locked(events)

    def _audit_locked(self, events: Sequence[AuditEvent]) -> None:
        self._check_open()
        self._flush_locked()
        self._append_locked(list(events))

    async def flush_audit(self) -> None:
        with self._lock:
            self._flush_locked()

    async def read_audit(self, query: AuditQuery = AuditQuery()) -> list[AuditRecord]:
        with self._lock:
            self._flush_locked()
            rows = [
                row
                for row in map(_ROW, self._audit)
                if row.seq > query.after_seq and _matches(row, query)
            ]
        return [r.record() for r in rows[: query.limit]]

    async def audit_head(self) -> tuple[int, str]:
        with self._lock:
            self._flush_locked()
            return self._head_locked()

    async def verify_audit(self) -> AuditVerification:
        with self._lock:
            self._flush_locked()
            rows = list(self._audit)
        return verify_chain([_ROW(r).record() for r in rows])

    async def count_events(
        self,
        event: str,
        *,
        tool: str,
        since: datetime,
        by: str | None = None,
        value: str | None = None,
    ) -> int:
        if by is not None and by not in _COUNT_BY:
            raise ValueError(f"count_events by must be one of {', '.join(_COUNT_BY)}, not {by!r}")
        with self._lock:
            self._flush_locked()
            return sum(
                1
                for r in map(_ROW, self._audit)
                if r.event == event
                and r.tool == tool
                and r.at >= iso_utc(since)
                and (by is None or getattr(r, by) == value)
            )

    def stats(self) -> dict[str, Any]:
        with self._lock:
            by_status: dict[str, int] = {}
            for r in self._requests.values():
                by_status[r.status] = by_status.get(r.status, 0) + 1
            return {
                "backend": "memory",
                "requests": by_status,
                "audit_rows": len(self._audit),
                "audit_queued": len(self._queued),
                "waiters": len(self._waiters),
            }

    # ---------------------------------------------------------------- internals
    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.url} is closed")

    def sealed_rows(self) -> list[SealedRow]:
        """Every audit row as stored (queued events sealed first): for tests that look at
        the stored text itself."""
        with self._lock:
            self._flush_locked()
            return list(map(_ROW, self._audit))

    def _head_locked(self) -> tuple[int, str]:
        if not self._audit:
            return 0, GENESIS_HASH
        last = self._audit[-1]
        return last[_SEQ], last[_HASH]

    def _append_locked(self, events: list[AuditEvent]) -> None:
        last_seq, last_hash = self._head_locked()
        self._audit.extend(map(tuple, seal_rows(events, last_seq, last_hash)))

    def _store_grants_locked(self, grants: Sequence[Grant]) -> None:
        for grant in grants:
            self._grants[grant.id] = grant.model_copy(deep=True)
        if grants:
            self._grants_version += 1

    def _flush_locked(self) -> None:
        events = []
        while self._queued:
            events.append(self._queued.popleft())
        if events:
            self._append_locked(events)


def _matches(record: SealedRow, query: AuditQuery) -> bool:
    return (
        (query.request_id is None or record.request_id == query.request_id)
        and (query.thread is None or record.thread == query.thread)
        and (query.tool is None or record.tool == query.tool)
        and (query.event is None or record.event == query.event)
        and (query.actor is None or record.actor == query.actor)
        and (query.since is None or record.at >= iso_utc(query.since))
        and (query.until is None or record.at < iso_utc(query.until))
    )
