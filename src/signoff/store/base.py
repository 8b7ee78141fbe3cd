"""The ``Store`` contract: durable requests, first-valid-decision-wins, waiting, audit.

Why the cut: the gate owns *what* happens to a request (the state machine in
:mod:`signoff.model.resolution`); a store owns *how* it is kept — atomically, durably, and
with a way to wake whoever waits. A new backend implements this protocol and passes the
shared store test suite (``tests/store/``); nothing else in signoff changes.

Rules every implementation keeps:

* ``update_request`` runs ``mutate`` on the freshest copy of the row inside one write
  transaction and commits the new row and the transition's audit events together (one
  outcome under any concurrency: two deciders never both win). When ``mutate`` raises,
  nothing is written and the exception propagates.
* Waiters are woken after commit, never before, and never by polling the row in a loop
  (a cheap change counter such as SQLite's ``PRAGMA data_version`` is allowed for
  cross-process wake-up).
* The audit log is append-only and hash-chained; ``audit_nowait`` may batch (group commit,
  flushed at least every 100 ms and on ``flush_audit``/``close``); approval events are
  written in the same transaction as the state change they describe.
* Methods may be awaited from any event loop (and from several loops over the store's
  life); implementations holding loop-bound resources run them on their own thread/loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    AuditRecord,
    AuditVerification,
    ThreadGrant,
    Transition,
)

Mutation = Callable[[ApprovalRequest], Transition]
ChangeListener = Callable[[ApprovalRequest, str], None]
"""Called after commit with the new state and the event name (created, decided, resolved,
expired, escalated, cancelled, executing, executed, failed). Must be cheap and never raise."""


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Filters for reading the audit log; all optional. Rows come in ``seq`` order, after
    ``after_seq`` (for paging); ``since`` is inclusive, ``until`` exclusive."""

    after_seq: int = 0
    limit: int = 1000
    request_id: str | None = None
    thread: str | None = None
    tool: str | None = None
    event: str | None = None
    actor: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@runtime_checkable
class Store(Protocol):
    """Durable home of approval requests and the audit log."""

    url: str

    async def open(self) -> None:
        """Create or migrate the schema and start background workers. Idempotent."""

    async def close(self) -> None:
        """Flush pending audit events and release resources."""

    async def create_request(
        self, request: ApprovalRequest, events: list[AuditEvent]
    ) -> tuple[ApprovalRequest, bool]:
        """Store a new request with its audit events; idempotent on ``(thread, tool_call_id)``.

        If every call of ``request`` already belongs to one stored request with the same
        names and arguments, return ``(existing, False)`` and write nothing. If any
        ``(thread, tool_call_id)`` is already stored with different name/arguments (or the
        calls are spread over other requests), raise :class:`IdempotencyConflict`.
        Otherwise insert and return ``(request, True)``.
        """
        ...

    async def get_request(self, request_id: str) -> ApprovalRequest | None: ...

    async def find_request_by_call(self, thread: str, tool_call_id: str) -> ApprovalRequest | None:
        """The request holding call ``tool_call_id`` on ``thread``, if any."""
        ...

    async def list_requests(
        self,
        *,
        status: str | None = None,
        thread: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ApprovalRequest]:
        """Newest first."""
        ...

    async def update_request(self, request_id: str, mutate: Mutation) -> Transition:
        """Atomically apply ``mutate`` to the stored request (see module docstring).

        Raises :class:`NotFound` for an unknown id. When the transition is unchanged
        (``changed=False``) nothing is written. Thread grants in the transition are stored
        in the same transaction.
        """
        ...

    async def due_requests(self, now: datetime, limit: int = 100) -> list[str]:
        """Ids of pending requests whose ``due_at`` (escalation or deadline) is ``<= now``."""
        ...

    async def next_due_at(self) -> datetime | None:
        """The earliest ``due_at`` among pending requests (for the sweeper's sleep)."""
        ...

    async def thread_grants(self, thread: str) -> list[ThreadGrant]: ...

    async def wait(self, request_id: str, timeout: float | None = None) -> ApprovalRequest:
        """Return the request once it is terminal, or its current state after ``timeout`` s.

        Wakes on commit in this process; across processes by the backend's notification
        mechanism. Raises :class:`NotFound` for an unknown id.
        """
        ...

    def add_listener(self, listener: ChangeListener) -> Callable[[], None]:
        """Register a change listener (in-process commits); returns a function removing it."""
        ...

    def audit_nowait(self, event: AuditEvent) -> None:
        """Queue a hot-path audit event (allowed/denied) for the batched writer."""
        ...

    async def append_audit(self, events: list[AuditEvent]) -> None:
        """Write audit events now, in their own transaction."""
        ...

    async def flush_audit(self) -> None:
        """Write every queued ``audit_nowait`` event before returning."""
        ...

    async def read_audit(self, query: AuditQuery = AuditQuery()) -> list[AuditRecord]: ...

    async def verify_audit(self) -> AuditVerification:
        """Walk the hash chain from the first row; report the first broken row."""
        ...

    async def count_events(
        self,
        event: str,
        *,
        tool: str,
        since: datetime,
        by: str | None = None,
        value: str | None = None,
    ) -> int:
        """How many audit events of this kind for ``tool`` since ``since``, optionally
        only those whose ``by`` (``principal``, ``agent`` or ``thread``) equals ``value``.
        Used to seed rate limits after a restart."""
        ...

    def stats(self) -> dict[str, Any]:
        """Backend-specific counters for diagnostics and metrics."""
        ...
