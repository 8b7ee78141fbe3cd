"""Row-level SQL for the SQLite store: each function runs inside the caller's transaction.

Kept apart from :mod:`signoff.store.sqlite` (threads, futures, waking) so the SQL reads as
one page: what is written where, and which index each read uses.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from signoff.model import (
    ApprovalRequest,
    AuditEvent,
    AuditRecord,
    IdempotencyConflict,
    NotFound,
    StoreError,
)
from signoff.store._idempotency import StoredCall
from signoff.store._quarantine import Read, Unreadable, cancelled_event, split, to_request
from signoff.store._sqlite_seal import Unsealed, chain, unsealed_all
from signoff.store.audit import GENESIS_HASH, iso_utc, parse_iso
from signoff.store.base import AuditQuery, QuarantinedRequest

AUDIT_COLUMNS = (
    "seq, event, at, request_id, thread, tool, tool_call_id, actor, principal, agent, rule, "
    "policy_hash, data, prev_hash, hash"
)
COUNT_BY = {"principal": "principal", "agent": "agent", "thread": "thread"}
MAX_PARAMS = 500


def epoch(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def from_epoch(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


# Every read of a request row takes these columns, so a row that cannot be parsed becomes an
# Unreadable (quarantined, never fatal) instead of an exception that stops the caller.
ROW = "id, thread, status, doc, quarantined_at, quarantine_reason"


# The sweeper's two reads. INDEXED BY pins the partial index: without ANALYZE statistics the
# planner prefers (status, created_at) and sorts; with it, an idle sweep over 100k pending
# requests costs ~0.03 ms (research §2.4), and SQLite errors out if the index is ever unusable.
# The index holds only readable pending rows (quarantined ones are marked out of it).
DUE_SQL = (
    f"SELECT {ROW} FROM requests INDEXED BY requests_due "
    "WHERE status = 'pending' AND quarantined_at IS NULL AND due_at <= ? ORDER BY due_at LIMIT ?"
)
NEXT_DUE_SQL = (
    "SELECT min(due_at) FROM requests INDEXED BY requests_due "
    "WHERE status = 'pending' AND quarantined_at IS NULL"
)
# /metrics: both counts come from partial indexes, never from parsing rows.
PENDING_COUNT_SQL = (
    "SELECT count(*) FROM requests INDEXED BY requests_due "
    "WHERE status = 'pending' AND quarantined_at IS NULL"
)
QUARANTINED_COUNT_SQL = (
    "SELECT count(*) FROM requests INDEXED BY requests_quarantined "
    "WHERE quarantined_at IS NOT NULL AND status = 'pending'"
)
QUARANTINED_SQL = (
    "SELECT id, thread, status, quarantined_at, quarantine_reason "
    "FROM requests INDEXED BY requests_quarantined "
    "WHERE quarantined_at IS NOT NULL ORDER BY quarantined_at DESC, id LIMIT ?"
)


def _marks(n: int) -> str:
    return ",".join("?" * n)


# ---------------------------------------------------------------- requests
def stored_calls(
    conn: sqlite3.Connection, thread: str, call_ids: Iterable[str]
) -> dict[str, StoredCall]:
    ids = list(call_ids)
    found: dict[str, StoredCall] = {}
    for start in range(0, len(ids), MAX_PARAMS):
        chunk = ids[start : start + MAX_PARAMS]
        rows = conn.execute(
            "SELECT tool_call_id, request_id, fingerprint FROM call_keys "
            f"WHERE thread = ? AND tool_call_id IN ({_marks(len(chunk))})",
            (thread, *chunk),
        )
        found.update({call_id: StoredCall(rid, fp) for call_id, rid, fp in rows})
    return found


def read_one(conn: sqlite3.Connection, request_id: str) -> tuple[Read, bool] | None:
    """The row ``request_id`` (see :func:`to_request`), or None when there is none."""
    row = conn.execute(f"SELECT {ROW} FROM requests WHERE id = ?", (request_id,)).fetchone()
    return to_request(row) if row else None


def mark_quarantined(conn: sqlite3.Connection, bad: Unreadable, origin: str, now: datetime) -> bool:
    """Mark ``bad`` (inside a write transaction): its pending notifications are cancelled and
    a ``quarantined`` audit event written — once, whoever finds it first."""
    if bad.marked:
        return False
    marked = conn.execute(
        "UPDATE requests SET quarantined_at = ?, quarantine_reason = ? "
        "WHERE id = ? AND quarantined_at IS NULL",
        (epoch(now), bad.reason, bad.id),
    ).rowcount
    if marked != 1:
        return False
    conn.execute(
        "UPDATE outbox SET status = 'cancelled', lease_until = NULL, error = ? "
        "WHERE request_id = ? AND status IN ('pending', 'sending')",
        ("request quarantined: it cannot be read", bad.id),
    )
    insert_audit(conn, [bad.audit_event()], origin)
    return True


def release_quarantine(conn: sqlite3.Connection, request_id: str) -> bool:
    """A marked row parses again (repaired by hand, or a newer signoff's document)."""
    return (
        conn.execute(
            "UPDATE requests SET quarantined_at = NULL, quarantine_reason = NULL "
            "WHERE id = ? AND quarantined_at IS NOT NULL",
            (request_id,),
        ).rowcount
        == 1
    )


def quarantined(conn: sqlite3.Connection, limit: int) -> list[QuarantinedRequest]:
    rows = conn.execute(QUARANTINED_SQL, (limit,))
    return [
        QuarantinedRequest(rid, thread, status, from_epoch(at), reason or "unreadable")
        for rid, thread, status, at, reason in rows
    ]


def cancel_quarantined(
    conn: sqlite3.Connection, request_id: str, actor: str, reason: str | None, origin: str
) -> QuarantinedRequest:
    """Close a quarantined row without parsing it (inside a write transaction)."""
    row = conn.execute(
        "SELECT thread, status, quarantined_at, quarantine_reason FROM requests WHERE id = ?",
        (request_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no approval request {request_id}")
    thread, status, at, why = row
    if at is None:
        raise StoreError(
            f"request {request_id} is not quarantined; cancel it with `signoff cancel {request_id}`"
        )
    if status == "pending":
        conn.execute(
            "UPDATE requests SET status = 'cancelled', version = version + 1 WHERE id = ?",
            (request_id,),
        )
        insert_audit(conn, [cancelled_event(request_id, thread, actor, reason, why)], origin)
        status = "cancelled"
    return QuarantinedRequest(request_id, thread, status, from_epoch(at), why or "unreadable")


def insert_request(
    conn: sqlite3.Connection,
    request: ApprovalRequest,
    prints: Mapping[str, str],
    doc: str | None = None,
) -> str:
    """Insert the row and its call keys; the document's JSON text as stored (``doc``: that
    text, dumped already by the caller)."""
    if doc is None:
        doc = request.model_dump_json()
    try:
        conn.execute(
            "INSERT INTO requests (id, kind, thread, status, created_at, due_at, version, doc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                request.id,
                request.kind,
                request.thread,
                request.status,
                epoch(request.created_at),
                epoch(request.sweep_at),
                request.version,
                doc,
            ),
        )
    except sqlite3.IntegrityError as exc:
        if "requests.id" not in str(exc):
            raise
        raise IdempotencyConflict(
            f"request id {request.id} is already used by other calls; use a new request id"
        ) from None
    conn.executemany(
        "INSERT INTO call_keys (thread, tool_call_id, request_id, fingerprint) VALUES (?, ?, ?, ?)",
        [(request.thread, call_id, request.id, fp) for call_id, fp in prints.items()],
    )
    return doc


# The conditional write: it lands only on the version the change was computed from;
# parameters (status, due_at, new version, doc, id, old version), rowcount 0 or 1
UPDATE_DOC = (
    "UPDATE requests SET status = ?, due_at = ?, version = ?, doc = ? WHERE id = ? AND version = ?"
)


def select_requests(
    conn: sqlite3.Connection,
    *,
    status: str | None,
    thread: str | None,
    kind: str | None,
    limit: int,
    offset: int,
) -> tuple[list[ApprovalRequest], list[Unreadable]]:
    """Newest first, quarantined rows left out; a row that fails to parse comes back apart
    (the caller quarantines it)."""
    where, args = [], []
    for column, value in (("status", status), ("thread", thread), ("kind", kind)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    where.append("quarantined_at IS NULL")
    rows = conn.execute(
        f"SELECT {ROW} FROM requests WHERE {' AND '.join(where)} "
        "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
        (*args, limit, offset),
    )
    return split(rows)


def terminal_among(
    conn: sqlite3.Connection, ids: list[str]
) -> tuple[list[ApprovalRequest], list[Unreadable]]:
    """Those of ``ids`` that are no longer pending, or quarantined (the watcher's one indexed
    SELECT): the waiters of a quarantined row are told, not left waiting."""
    good: list[ApprovalRequest] = []
    bad: list[Unreadable] = []
    for start in range(0, len(ids), MAX_PARAMS):
        chunk = ids[start : start + MAX_PARAMS]
        rows = conn.execute(
            f"SELECT {ROW} FROM requests WHERE id IN ({_marks(len(chunk))}) "
            "AND (status != 'pending' OR quarantined_at IS NOT NULL)",
            chunk,
        )
        found, unreadable = split(rows)
        good.extend(found)
        bad.extend(unreadable)
    return good, bad


def docs_by_id(conn: sqlite3.Connection, ids: list[str]) -> dict[str, ApprovalRequest]:
    """The readable ones of ``ids`` (an unreadable row is left out)."""
    out = {}
    for start in range(0, len(ids), MAX_PARAMS):
        chunk = ids[start : start + MAX_PARAMS]
        rows = conn.execute(f"SELECT {ROW} FROM requests WHERE id IN ({_marks(len(chunk))})", chunk)
        out.update({r.id: r for r in split(rows)[0]})
    return out


# ---------------------------------------------------------------- audit
_INSERT_AUDIT = (
    f"INSERT INTO audit ({AUDIT_COLUMNS}, origin) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class ChainHead:
    """The audit chain's last ``(seq, hash)`` as the open write transaction has it, and the
    group's sealed rows not inserted yet.

    A group commit registers one for its connection (:func:`track_chain_head`): its jobs
    read the head from the database once, not once each, and their audit rows are sealed at
    once but inserted with one ``executemany`` just before the COMMIT (:meth:`flush`). A job
    whose savepoint rolls back takes its rows back out (:meth:`undo_to` the :meth:`mark` at
    its start); a transaction that rolls back drops them all (:meth:`drop`), and the next
    append reads the head again from the database. Nothing else in a group reads the audit
    table, so rows waiting here are never missed by a reader.
    """

    __slots__ = ("pending", "value")

    def __init__(self) -> None:
        self.value: tuple[int, str] | None = None
        self.pending: list[tuple[Any, ...]] = []

    def mark(self) -> int:
        return len(self.pending)

    def undo_to(self, mark: int) -> None:
        """Forget the rows sealed since ``mark`` (their job rolled back)."""
        del self.pending[mark:]
        last = self.pending[-1] if self.pending else None
        self.value = (int(last[0]), str(last[14])) if last is not None else None

    def drop(self) -> None:
        """The transaction rolled back: no row of it exists, the head is the database's."""
        self.pending.clear()
        self.value = None

    def flush(self, conn: sqlite3.Connection) -> None:
        """Insert every sealed row (inside the transaction, before its COMMIT)."""
        if self.pending:
            rows, self.pending = self.pending, []
            conn.executemany(_INSERT_AUDIT, rows)


_chain_heads: dict[sqlite3.Connection, ChainHead] = {}
# The head each writer connection's last COMMIT left, for its next group when no other
# connection has committed since (``PRAGMA data_version`` unchanged): one SELECT less a group.
_committed_heads: dict[sqlite3.Connection, tuple[int, str]] = {}


def committed(conn: sqlite3.Connection, head: ChainHead) -> None:
    """After a COMMIT: remember where it left the chain (if it wrote to it)."""
    if head.value is not None:
        _committed_heads[conn] = head.value


def forget_committed(conn: sqlite3.Connection) -> None:
    _committed_heads.pop(conn, None)


def resume_chain(conn: sqlite3.Connection, head: ChainHead) -> None:
    """A new transaction in which nobody else has committed since ours: the head is known."""
    head.value = _committed_heads.get(conn)


def track_chain_head(conn: sqlite3.Connection) -> ChainHead:
    """Keep the chain head of ``conn``'s open transaction until :func:`untrack_chain_head`."""
    head = _chain_heads[conn] = ChainHead()
    return head


def untrack_chain_head(conn: sqlite3.Connection) -> None:
    _chain_heads.pop(conn, None)


def insert_audit(conn: sqlite3.Connection, events: list[AuditEvent], origin: str) -> None:
    """Chain ``events`` after the last row *inside this transaction*.

    ``BEGIN IMMEDIATE`` already holds the write lock, so no other process can append between
    reading the last hash and inserting: the chain stays linear across processes. Inside a
    group commit the rows are inserted at its end (:meth:`ChainHead.flush`).
    """
    append_sealed(conn, seal_unsealed(conn, unsealed_all(events), origin))


def seal_unsealed(
    conn: sqlite3.Connection, items: list[Unsealed], origin: str
) -> list[tuple[Any, ...]]:
    """Events (their chain-independent text, :mod:`._sqlite_seal`) sealed after the chain's
    head as this transaction has it, not stored yet: :func:`append_sealed` stores them
    (nothing may be appended in between)."""
    if not items:
        return []
    return chain(items, *_head(conn), origin)


def _head(conn: sqlite3.Connection) -> tuple[int, str]:
    """The chain's last ``(seq, hash)`` as this transaction has it."""
    head = _chain_heads.get(conn)
    known = head.value if head is not None else None
    if known is None:
        last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
        known = (int(last[0]), str(last[1])) if last else (0, GENESIS_HASH)
        if head is not None:
            head.value = known
    return known


def append_sealed(conn: sqlite3.Connection, sealed: list[tuple[Any, ...]]) -> None:
    """Store rows from :func:`seal_unsealed`: queued for the group's flush, or inserted now."""
    if not sealed:
        return
    head = _chain_heads.get(conn)
    if head is None:
        conn.executemany(_INSERT_AUDIT, sealed)
        return
    head.pending.extend(sealed)
    head.value = (int(sealed[-1][0]), str(sealed[-1][14]))


def to_record(row: tuple[Any, ...]) -> AuditRecord:
    (seq, event, at, request_id, thread, tool, call_id, actor, principal, agent, rule, policy,
     data, prev_hash, digest) = row  # fmt: skip
    return AuditRecord(
        seq=seq,
        event=event,
        at=parse_iso(at),
        request_id=request_id,
        thread=thread,
        tool=tool,
        tool_call_id=call_id,
        actor=actor,
        principal=principal,
        agent=agent,
        rule=rule,
        policy_hash=policy,
        data=json.loads(data),
        prev_hash=prev_hash,
        hash=digest,
    )


def select_audit(conn: sqlite3.Connection, query: AuditQuery) -> list[AuditRecord]:
    where: list[str] = ["seq > ?"]
    args: list[Any] = [query.after_seq]
    for column in ("request_id", "thread", "tool", "event", "actor"):
        value = getattr(query, column)
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if query.since is not None:
        where.append("at >= ?")
        args.append(iso_utc(query.since))
    if query.until is not None:
        where.append("at < ?")
        args.append(iso_utc(query.until))
    rows = conn.execute(
        f"SELECT {AUDIT_COLUMNS} FROM audit WHERE {' AND '.join(where)} ORDER BY seq LIMIT ?",
        (*args, query.limit),
    )
    return [to_record(row) for row in rows]


def audit_chunk(conn: sqlite3.Connection, after_seq: int, size: int) -> list[AuditRecord]:
    rows = conn.execute(
        f"SELECT {AUDIT_COLUMNS} FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", (after_seq, size)
    )
    return [to_record(row) for row in rows]


def count_audit(
    conn: sqlite3.Connection,
    event: str,
    tool: str,
    since: datetime,
    by: str | None,
    value: str | None,
) -> int:
    sql = "SELECT count(*) FROM audit WHERE tool = ? AND event = ? AND at >= ?"
    args: list[Any] = [tool, event, iso_utc(since)]
    if by is not None:
        column = COUNT_BY.get(by)
        if column is None:
            raise ValueError(f"count_events by must be one of {', '.join(COUNT_BY)}, not {by!r}")
        sql += f" AND {column} IS ?"
        args.append(value)
    return int(conn.execute(sql, args).fetchone()[0])


def foreign_changes(
    conn: sqlite3.Connection, after_seq: int, up_to: int, origin: str
) -> dict[str, str]:
    """request id -> last state event written by *other* store instances in (after, up_to]."""
    rows = conn.execute(
        "SELECT request_id, event FROM audit WHERE seq > ? AND seq <= ? "
        "AND request_id IS NOT NULL AND origin IS NOT ? ORDER BY seq",
        (after_seq, up_to, origin),
    )
    changes: dict[str, str] = {}
    for request_id, event in rows:
        if event in STATE_EVENTS:
            changes.pop(request_id, None)
            changes[request_id] = event
    return changes


STATE_EVENTS = frozenset(
    {
        "created",
        "decided",
        "auto_approved",
        "edit_rerouted",
        "stage_started",
        "escalated",
        "resolved",
        "expired",
        "cancelled",
        "executing",
        "executed",
        "failed",
    }
)
