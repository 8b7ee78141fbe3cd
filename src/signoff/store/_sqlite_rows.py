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
    ThreadGrant,
)
from signoff.store._idempotency import StoredCall
from signoff.store.audit import GENESIS_HASH, canonical_json, iso_utc, parse_iso, seal_all
from signoff.store.base import AuditQuery

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


def parse_request(doc: str) -> ApprovalRequest:
    return ApprovalRequest.model_validate_json(doc)


# The sweeper's two reads. INDEXED BY pins the partial index: without ANALYZE statistics the
# planner prefers (status, created_at) and sorts; with it, an idle sweep over 100k pending
# requests costs ~0.03 ms (research §2.4), and SQLite errors out if the index is ever unusable.
DUE_SQL = (
    "SELECT id FROM requests INDEXED BY requests_due "
    "WHERE status = 'pending' AND due_at <= ? ORDER BY due_at LIMIT ?"
)
NEXT_DUE_SQL = "SELECT min(due_at) FROM requests INDEXED BY requests_due WHERE status = 'pending'"


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


def read_doc(conn: sqlite3.Connection, request_id: str) -> ApprovalRequest | None:
    row = conn.execute("SELECT doc FROM requests WHERE id = ?", (request_id,)).fetchone()
    return parse_request(row[0]) if row else None


def insert_request(
    conn: sqlite3.Connection, request: ApprovalRequest, prints: Mapping[str, str]
) -> None:
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
                epoch(request.due_at),
                request.version,
                request.model_dump_json(),
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


def update_doc(conn: sqlite3.Connection, request: ApprovalRequest, old_version: int) -> int:
    """The conditional write: it only lands on the version the mutation was computed from."""
    return conn.execute(
        "UPDATE requests SET status = ?, due_at = ?, version = ?, doc = ? "
        "WHERE id = ? AND version = ?",
        (
            request.status,
            epoch(request.due_at),
            request.version,
            request.model_dump_json(),
            request.id,
            old_version,
        ),
    ).rowcount


def insert_grants(conn: sqlite3.Connection, grants: Iterable[ThreadGrant]) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO thread_grants (thread, request_id, tool_call_id, approver, at) "
        "VALUES (?, ?, ?, ?, ?)",
        [(g.thread, g.request_id, g.tool_call_id, g.approver, iso_utc(g.at)) for g in grants],
    )


def select_grants(conn: sqlite3.Connection, thread: str) -> list[ThreadGrant]:
    rows = conn.execute(
        "SELECT thread, approver, request_id, tool_call_id, at FROM thread_grants "
        "WHERE thread = ? ORDER BY at",
        (thread,),
    )
    return [ThreadGrant(t, a, r, c, parse_iso(at)) for t, a, r, c, at in rows]


def select_requests(
    conn: sqlite3.Connection,
    *,
    status: str | None,
    thread: str | None,
    kind: str | None,
    limit: int,
    offset: int,
) -> list[ApprovalRequest]:
    where, args = [], []
    for column, value in (("status", status), ("thread", thread), ("kind", kind)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows = conn.execute(
        f"SELECT doc FROM requests {clause}ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
        (*args, limit, offset),
    )
    return [parse_request(doc) for (doc,) in rows]


def terminal_among(conn: sqlite3.Connection, ids: list[str]) -> list[ApprovalRequest]:
    """Those of ``ids`` that are no longer pending (the watcher's one indexed SELECT)."""
    out: list[ApprovalRequest] = []
    for start in range(0, len(ids), MAX_PARAMS):
        chunk = ids[start : start + MAX_PARAMS]
        rows = conn.execute(
            f"SELECT doc FROM requests WHERE id IN ({_marks(len(chunk))}) AND status != 'pending'",
            chunk,
        )
        out.extend(parse_request(doc) for (doc,) in rows)
    return out


def docs_by_id(conn: sqlite3.Connection, ids: list[str]) -> dict[str, ApprovalRequest]:
    out = {}
    for start in range(0, len(ids), MAX_PARAMS):
        chunk = ids[start : start + MAX_PARAMS]
        rows = conn.execute(
            f"SELECT id, doc FROM requests WHERE id IN ({_marks(len(chunk))})", chunk
        )
        out.update({rid: parse_request(doc) for rid, doc in rows})
    return out


# ---------------------------------------------------------------- audit
def insert_audit(
    conn: sqlite3.Connection, events: list[AuditEvent], origin: str
) -> list[AuditRecord]:
    """Chain ``events`` after the last row *inside this transaction*.

    ``BEGIN IMMEDIATE`` already holds the write lock, so no other process can append between
    reading the last hash and inserting: the chain stays linear across processes.
    """
    if not events:
        return []
    last = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
    last_seq, last_hash = (int(last[0]), str(last[1])) if last else (0, GENESIS_HASH)
    records = seal_all(events, last_seq, last_hash)
    conn.executemany(
        f"INSERT INTO audit ({AUDIT_COLUMNS}, origin) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [_audit_row(r, origin) for r in records],
    )
    return records


def _audit_row(r: AuditRecord, origin: str) -> tuple[Any, ...]:
    return (
        r.seq,
        r.event,
        iso_utc(r.at),
        r.request_id,
        r.thread,
        r.tool,
        r.tool_call_id,
        r.actor,
        r.principal,
        r.agent,
        r.rule,
        r.policy_hash,
        canonical_json(r.data),
        r.prev_hash,
        r.hash,
        origin,
    )


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
        "escalated",
        "resolved",
        "expired",
        "cancelled",
        "executing",
        "executed",
        "failed",
    }
)
