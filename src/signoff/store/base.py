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
* Requests a store hands out (reads, waits, an update's transition) may be snapshots it
  keeps and shares: callers treat them as read-only (``copy_for_update()`` gives a request
  of one's own), and a store's next change works on a copy (``store/_working.py``).
* Methods may be awaited from any event loop (and from several loops over the store's
  life); implementations holding loop-bound resources run them on their own thread/loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    AuditRecord,
    AuditVerification,
    Transition,
)
from signoff.model.grants import Grant
from signoff.model.outbox import PROMPT_KINDS as PROMPT_KINDS
from signoff.model.outbox import OutboxItem as OutboxItem
from signoff.model.outbox import OutboxKind as OutboxKind
from signoff.model.outbox import OutboxOutcome as OutboxOutcome
from signoff.model.outbox import OutboxStatus as OutboxStatus

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


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """Indexed counts for ``/metrics``: readable pending requests, and quarantined requests
    still pending (rows nobody can read; ``signoff cancel ID`` closes each)."""

    pending: int
    quarantined: int


@dataclass(frozen=True, slots=True)
class QuarantinedRequest:
    """A request row the store cannot read, and why (see :mod:`signoff.store._quarantine`).

    ``quarantined_at`` is None for a row ``signoff db check`` found unreadable that no
    store has marked yet (the check only reads)."""

    id: str
    thread: str
    status: str
    quarantined_at: datetime | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "thread": self.thread,
            "status": self.status,
            "quarantined_at": self.quarantined_at.isoformat() if self.quarantined_at else None,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One finding of :meth:`Store.check`: ``ok`` or not, and what was seen."""

    name: str
    ok: bool
    detail: str


@dataclass(slots=True)
class StoreCheck:
    """What ``signoff db check`` reports: schema version, each check, quarantined rows.

    Healthy when every check passed; quarantined rows that are already closed are listed but
    do not make it unhealthy (nothing waits on them)."""

    store: str
    backend: str
    version: int
    supported: int
    items: list[CheckItem] = field(default_factory=list)
    quarantined: list[QuarantinedRequest] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(item.ok for item in self.items)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.items.append(CheckItem(name, ok, detail))

    def add_quarantine(self, rows: list[QuarantinedRequest]) -> None:
        """The quarantine check: unhealthy while a quarantined (or unreadable) request is
        still pending."""
        self.quarantined = rows
        open_ids = [q.id for q in rows if q.status == "pending"]
        detail = (
            f"{len(open_ids)} pending request(s) cannot be read: {', '.join(open_ids)}; "
            "`signoff cancel ID` closes each"
            if open_ids
            else "none pending"
        )
        if len(rows) > len(open_ids):
            detail += f" ({len(rows) - len(open_ids)} closed quarantined row(s) kept)"
        self.add("quarantine", not open_ids, detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "backend": self.backend,
            "ok": self.ok,
            "version": self.version,
            "supported": self.supported,
            "checks": [{"name": i.name, "ok": i.ok, "detail": i.detail} for i in self.items],
            "quarantined": [q.to_json() for q in self.quarantined],
        }


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

        ``mutate`` gets a private copy of the row, which it may change and return. The copy
        may share, with the snapshot it replaces, the items a change only ever replaces whole
        (action requests, decisions, review configs, the principal, each call's action;
        ``store/_working.py``, ``model/resolution.py``): its lists and calls are its own.

        Raises :class:`NotFound` for an unknown id. When the transition is unchanged
        (``changed=False``) nothing is written. Grants in the transition (created by the
        decision) are stored in the same transaction, which then also bumps
        :meth:`grants_version`; a grant id already stored refuses the whole change
        (:class:`StoreError`, nothing written).
        """
        ...

    async def due_requests(self, now: datetime, limit: int = 100) -> list[str]:
        """Ids of pending requests whose ``due_at`` (escalation or deadline) is ``<= now``.

        Quarantined rows are left out, and so is a due row found unreadable here (it is
        quarantined on the spot), so one bad row never stops a sweep."""
        ...

    async def next_due_at(self) -> datetime | None:
        """The earliest ``due_at`` among pending requests (for the sweeper's sleep)."""
        ...

    # ---------------------------------------------------------------- grants
    async def create_grant(self, grant: Grant, events: list[AuditEvent]) -> Grant:
        """Store a new grant with its audit events (``grant_created``) in one transaction and
        bump :meth:`grants_version`. Creating the same grant again (same id, equal content)
        returns the stored one and writes nothing; another grant under a stored id raises
        :class:`IdempotencyConflict`."""
        ...

    async def revoke_grant(
        self,
        grant_id: str,
        *,
        by: str,
        reason: str | None,
        now: datetime,
        events: list[AuditEvent],
    ) -> Grant:
        """Mark the grant revoked (``revoked_at=now``, ``revoked_by``, ``revoke_reason``) and
        write ``events`` in one transaction; bump :meth:`grants_version`. A grant already
        revoked is returned unchanged and nothing is written. Raises :class:`NotFound` for
        an unknown id."""
        ...

    async def get_grant(self, grant_id: str) -> Grant | None: ...

    async def list_grants(
        self, *, active_at: datetime | None = None, limit: int = 1000
    ) -> list[Grant]:
        """Newest first (``created_at``). With ``active_at``: only grants not revoked whose
        ``expires_at`` is after it. An unreadable grant is left out (logged)."""
        ...

    async def grants_version(self) -> int:
        """A number that changes whenever any process creates or revokes a grant (also
        through :meth:`update_request`). One single-row read: a gate polls it about every
        half second to know when to reload its grant cache."""
        ...

    async def note_expired_grants(self, now: datetime) -> list[Grant]:
        """Grants not revoked whose ``expires_at <= now`` and whose expiry was not noted yet:
        mark each noted and write one ``grant_expired`` audit event per grant, in one
        transaction; returns them (the gate's sweeper). Each expiry is noted once, whatever
        the number of processes sweeping."""
        ...

    async def redaction_salt(self) -> bytes:
        """A random secret created with the store (32 bytes), shared by every process using
        it: it keys the digests of secret arguments when the config has no ``audit.key``
        (see :mod:`signoff.policy.redact`). Never exported or shown."""
        ...

    # ---------------------------------------------------------------- quarantine

    async def count_requests(self) -> RequestCounts:
        """Pending and quarantined-pending counts from indexes (no row is parsed)."""
        ...

    async def quarantined_requests(self, limit: int = 100) -> list[QuarantinedRequest]:
        """Quarantined rows, newest mark first (for ``signoff db check``)."""
        ...

    async def cancel_quarantined(
        self, request_id: str, *, actor: str, reason: str | None = None
    ) -> QuarantinedRequest:
        """Close a quarantined request without parsing it: status ``cancelled``, a
        ``cancelled`` audit event, its waiters fail. A row already closed is returned as it
        is. Raises :class:`NotFound` for an unknown id and :class:`StoreError` when the row
        is not quarantined (cancel it the normal way)."""
        ...

    async def check(self) -> StoreCheck:
        """Health of the store for ``signoff db check`` (schema, triggers, quarantine…)."""
        ...

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

    def audit_failure(self) -> str | None:
        """Why the batched audit writer's last attempt failed; None while it works.

        Read on the allow/deny hot path (no I/O): while it is set the gate denies allowed
        calls (rule ``audit_unavailable``), because a call must not run unrecorded.
        """
        ...

    async def check_writable(self) -> None:
        """Raise :class:`StoreError` naming the store and the fix unless it can be written
        (checked when a gate starts, so a read-only store fails the first call, not the
        audit writer minutes later)."""
        ...

    async def read_audit(self, query: AuditQuery = AuditQuery()) -> list[AuditRecord]: ...

    async def audit_head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last written audit row; ``(0, GENESIS_HASH)`` when empty.

        What a signed checkpoint records (:mod:`signoff.audit`); one indexed read."""
        ...

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


# ---------------------------------------------------------------- notification outbox
# (the rows' types live in the model: a Transition carries the rows its commit stores)


@runtime_checkable
class Outbox(Protocol):
    """The notification outbox: at-least-once delivery that survives a crash.

    Why it lives in the store: a request and the messages announcing it are written in one
    transaction (:meth:`OutboxStore.create_request`), so a crash can lose neither without
    the other. Workers *claim* due rows under a lease (any number of processes or replicas
    share the work; a worker killed mid-send leaves its rows to be claimed again once the
    lease ends) and then complete, retry or fail them.
    """

    async def enqueue_outbox(self, items: Sequence[OutboxItem]) -> int:
        """Insert items whose id is not stored yet (insert-or-ignore); returns how many."""
        ...

    async def claim_outbox(
        self,
        now: datetime,
        *,
        limit: int = 50,
        lease_s: float = 60.0,
        channels: Collection[str] | None = None,
    ) -> list[OutboxItem]:
        """Lease up to ``limit`` due rows (``pending`` with ``next_at <= now``, or ``sending``
        whose lease ended), oldest ``next_at`` first, optionally only for ``channels``.

        Each claimed row becomes ``sending`` with ``attempts + 1`` and
        ``lease_until = now + lease_s``, atomically: two workers never claim one row while
        its lease holds."""
        ...

    async def complete_outbox(
        self,
        item_id: str,
        *,
        status: OutboxOutcome = "sent",
        ref: dict[str, Any] | None = None,
        error: str | None = None,
        audit: Sequence[AuditEvent] = (),
    ) -> None:
        """Finish a row: ``sent`` (with the provider's ``ref``), ``failed`` or ``cancelled``;
        ``audit`` (e.g. the ``notified`` event) is appended in the same transaction, so a crash
        leaves both the outcome and its audit event, or neither."""
        ...

    async def retry_outbox(self, item_id: str, *, next_at: datetime, error: str) -> None:
        """Give a claimed row back as ``pending`` until ``next_at``, noting the error."""
        ...

    async def cancel_outbox_for(
        self, request_id: str, kinds: Collection[str] = PROMPT_KINDS
    ) -> int:
        """Cancel the request's ``pending`` rows of these kinds (a row being sent is left to
        its worker, which checks the request before sending); returns how many."""
        ...

    async def outbox_for(self, request_id: str) -> list[OutboxItem]:
        """Every row of one request, oldest first (for updates, diagnostics and tests)."""
        ...

    async def next_outbox_at(self, channels: Collection[str] | None = None) -> datetime | None:
        """When the next row falls due: the earliest pending ``next_at`` or sending
        ``lease_until`` (for the worker's sleep)."""
        ...


@runtime_checkable
class OutboxStore(Store, Outbox, Protocol):
    """A store with a durable notification outbox (every built-in store: memory, SQLite and
    PostgreSQL; a third-party ``Store`` without one gets an in-memory outbox from the gate).

    ``create_request`` takes the request's first outbox rows and writes them in the same
    transaction as the request — only when the request is created (an idempotent repeat
    writes nothing)."""

    async def create_request(
        self,
        request: ApprovalRequest,
        events: list[AuditEvent],
        outbox: Sequence[OutboxItem] = (),
    ) -> tuple[ApprovalRequest, bool]: ...
