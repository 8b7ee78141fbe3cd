"""Row-level SQL of grants in SQLite; each function runs inside the caller's transaction (the
writer thread's ``BEGIN IMMEDIATE`` for writes, so a read-then-write here is atomic across
processes).

The document (``doc``) is the truth; the other columns exist for the indexes: ``grants_active``
(not revoked, by expiry) answers the gate's cache load, ``grants_unnoted`` the sweeper's
expiry pass. ``grants_version`` is one row bumped by every create or revoke.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from signoff.model import AuditEvent, NotFound
from signoff.model.grants import Grant
from signoff.store import _grants
from signoff.store._sqlite_rows import epoch, insert_audit

COLUMNS = (
    "id, tool, rule, effect, scope, principal, agent, thread, created_at, expires_at, "
    "revoked_at, doc"
)

# INDEXED BY pins the partial indexes, as for the sweeper's request reads (_sqlite_rows).
ACTIVE_SQL = (
    "SELECT id, doc FROM grants INDEXED BY grants_active "
    "WHERE revoked_at IS NULL AND expires_at > ? ORDER BY created_at DESC, id DESC LIMIT ?"
)
ALL_SQL = "SELECT id, doc FROM grants ORDER BY created_at DESC, id DESC LIMIT ?"
UNNOTED_SQL = (
    "SELECT id, doc FROM grants INDEXED BY grants_unnoted "
    "WHERE revoked_at IS NULL AND expired_noted = 0 AND expires_at <= ? ORDER BY expires_at, id"
)
VERSION_SQL = "SELECT version FROM grants_version WHERE id = 1"


def _row(grant: Grant) -> tuple[object, ...]:
    return (
        grant.id,
        grant.tool,
        grant.rule,
        grant.effect,
        grant.scope,
        grant.principal,
        grant.agent,
        grant.thread,
        epoch(grant.created_at),
        epoch(grant.expires_at),
        epoch(grant.revoked_at) if grant.revoked_at is not None else None,
        grant.model_dump_json(),
    )


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE grants_version SET version = version + 1 WHERE id = 1")


def insert(conn: sqlite3.Connection, grants: Sequence[Grant]) -> None:
    """New grants of a decision (``update_request``): a stored id refuses the whole change."""
    if not grants:
        return
    for grant in grants:
        if conn.execute("SELECT 1 FROM grants WHERE id = ?", (grant.id,)).fetchone():
            raise _grants.duplicate(grant.id)
    conn.executemany(
        f"INSERT INTO grants ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [_row(g) for g in grants],
    )
    _bump(conn)


def get(conn: sqlite3.Connection, grant_id: str) -> Grant | None:
    row = conn.execute("SELECT doc FROM grants WHERE id = ?", (grant_id,)).fetchone()
    return _grants.parse(row[0], grant_id) if row else None


def create(conn: sqlite3.Connection, grant: Grant, events: list[AuditEvent], origin: str) -> Grant:
    stored = get(conn, grant.id)
    if stored is not None:
        return _grants.same_or_conflict(stored, grant)
    insert(conn, [grant])
    insert_audit(conn, events, origin)
    return grant


def revoke(
    conn: sqlite3.Connection,
    grant_id: str,
    *,
    by: str,
    reason: str | None,
    now: datetime,
    events: list[AuditEvent],
    origin: str,
) -> Grant:
    stored = get(conn, grant_id)
    if stored is None:
        raise NotFound(f"no grant {grant_id}")
    if stored.revoked_at is not None:
        return stored
    done = _grants.revoked(stored, by=by, reason=reason, now=now)
    conn.execute(
        "UPDATE grants SET revoked_at = ?, doc = ? WHERE id = ?",
        (epoch(now), done.model_dump_json(), grant_id),
    )
    _bump(conn)
    insert_audit(conn, events, origin)
    return done


def select(conn: sqlite3.Connection, active_at: datetime | None, limit: int) -> list[Grant]:
    if active_at is None:
        rows = conn.execute(ALL_SQL, (limit,)).fetchall()
    else:
        rows = conn.execute(ACTIVE_SQL, (epoch(active_at), limit)).fetchall()
    return _grants.readable(rows)


def version(conn: sqlite3.Connection) -> int:
    row = conn.execute(VERSION_SQL).fetchone()
    return int(row[0]) if row else 0


def note_expired(conn: sqlite3.Connection, now: datetime, origin: str) -> list[Grant]:
    """Mark due, unnoted grants noted and audit each once. An unreadable one is marked too
    (it would otherwise come back on every pass) but not returned."""
    rows = conn.execute(UNNOTED_SQL, (epoch(now),)).fetchall()
    if not rows:
        return []
    conn.executemany(
        "UPDATE grants SET expired_noted = 1 WHERE id = ?", [(grant_id,) for grant_id, _ in rows]
    )
    expired = _grants.readable(rows)
    insert_audit(conn, [_grants.expired_event(g, now) for g in expired], origin)
    return expired
