"""Row-level SQL of the notification outbox in SQLite; each function runs inside the
caller's transaction (the writer thread's ``BEGIN IMMEDIATE`` for writes).

Claiming is one write transaction: select the due rows, mark them ``sending`` with a lease.
``BEGIN IMMEDIATE`` holds the file's write lock, so two processes never claim one row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from signoff.store._sqlite_rows import epoch, from_epoch
from signoff.store.base import OutboxItem

COLUMNS = (
    "id, request_id, channel, kind, recipient, person, data, status, attempts, created_at, "
    "next_at, lease_until, ref, error"
)


def _row(item: OutboxItem) -> tuple[Any, ...]:
    return (
        item.id,
        item.request_id,
        item.channel,
        item.kind,
        item.recipient,
        item.person,
        json.dumps(item.data, sort_keys=True, default=str),
        item.status,
        item.attempts,
        epoch(item.created_at),
        epoch(item.next_at),
        epoch(item.lease_until) if item.lease_until is not None else None,
        json.dumps(item.ref, sort_keys=True, default=str) if item.ref is not None else None,
        item.error,
    )


def to_item(row: tuple[Any, ...]) -> OutboxItem:
    (id_, request_id, channel, kind, recipient, person, data, status, attempts, created_at,
     next_at, lease_until, ref, error) = row  # fmt: skip
    return OutboxItem(
        id=id_,
        request_id=request_id,
        channel=channel,
        kind=kind,
        recipient=recipient,
        person=person,
        data=json.loads(data),
        status=status,
        attempts=int(attempts),
        created_at=from_epoch(created_at),
        next_at=from_epoch(next_at),
        lease_until=from_epoch(lease_until) if lease_until is not None else None,
        ref=json.loads(ref) if ref is not None else None,
        error=error,
    )


_INSERT = f"INSERT OR IGNORE INTO outbox ({COLUMNS}) VALUES ({','.join('?' * 14)})"


def insert(conn: sqlite3.Connection, items: Sequence[OutboxItem]) -> int:
    """The rows of ``items`` (none: no statement — a request without channels is the common
    create, and each statement is a GIL hand-off on the SQLite writer)."""
    if not items:
        return 0
    before = conn.total_changes
    conn.executemany(_INSERT, [_row(i) for i in items])
    return conn.total_changes - before


def _channel_filter(channels: Collection[str] | None) -> tuple[str, list[str]]:
    if channels is None:
        return "", []
    names = sorted(channels)
    if not names:
        return " AND 0", []
    return f" AND channel IN ({','.join('?' * len(names))})", names


def claim(
    conn: sqlite3.Connection,
    now: datetime,
    limit: int,
    lease_s: float,
    channels: Collection[str] | None,
) -> list[OutboxItem]:
    at = epoch(now)
    where, names = _channel_filter(channels)
    # Two index-friendly halves (each uses its partial index) instead of one OR.
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM ("
        f"SELECT * FROM outbox WHERE status = 'pending' AND next_at <= ?{where} "
        f"UNION ALL "
        f"SELECT * FROM outbox WHERE status = 'sending' AND lease_until <= ?{where}"
        f") ORDER BY next_at, id LIMIT ?",
        (at, *names, at, *names, limit),
    ).fetchall()
    items = [to_item(r) for r in rows]
    lease = at + lease_s
    conn.executemany(
        "UPDATE outbox SET status = 'sending', attempts = attempts + 1, lease_until = ? "
        "WHERE id = ?",
        [(lease, i.id) for i in items],
    )
    for item in items:
        item.status = "sending"
        item.attempts += 1
        item.lease_until = from_epoch(lease)
    return items


def complete(
    conn: sqlite3.Connection,
    item_id: str,
    status: str,
    ref: dict[str, Any] | None,
    error: str | None,
) -> None:
    conn.execute(
        "UPDATE outbox SET status = ?, lease_until = NULL, ref = ?, error = ? WHERE id = ?",
        (
            status,
            json.dumps(ref, sort_keys=True, default=str) if ref is not None else None,
            error,
            item_id,
        ),
    )


def retry(conn: sqlite3.Connection, item_id: str, next_at: datetime, error: str) -> None:
    conn.execute(
        "UPDATE outbox SET status = 'pending', next_at = ?, lease_until = NULL, error = ? "
        "WHERE id = ?",
        (epoch(next_at), error, item_id),
    )


def cancel_for(conn: sqlite3.Connection, request_id: str, kinds: Collection[str]) -> int:
    names = sorted(kinds)
    if not names:
        return 0
    return conn.execute(
        "UPDATE outbox SET status = 'cancelled' WHERE request_id = ? AND status = 'pending' "
        f"AND kind IN ({','.join('?' * len(names))})",
        (request_id, *names),
    ).rowcount


def for_request(conn: sqlite3.Connection, request_id: str) -> list[OutboxItem]:
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM outbox WHERE request_id = ? ORDER BY created_at, id",
        (request_id,),
    )
    return [to_item(r) for r in rows]


def next_at(conn: sqlite3.Connection, channels: Collection[str] | None) -> datetime | None:
    where, names = _channel_filter(channels)
    value = conn.execute(
        f"SELECT min(t) FROM ("
        f"SELECT min(next_at) AS t FROM outbox WHERE status = 'pending'{where} "
        f"UNION ALL "
        f"SELECT min(lease_until) FROM outbox WHERE status = 'sending'{where})",
        (*names, *names),
    ).fetchone()[0]
    return from_epoch(value) if value is not None else None
