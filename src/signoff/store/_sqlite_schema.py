"""SQLite connections, schema and migrations for :class:`~signoff.store.sqlite.SQLiteStore`.

The schema version lives in ``PRAGMA user_version``; ``MIGRATIONS[i]`` takes a database from
version ``i`` to ``i + 1``. ``migrate`` applies the missing ones in one ``BEGIN IMMEDIATE``
transaction, so two processes opening a fresh file at once cannot both create it. The same
transaction recreates the audit table's append-only triggers if someone dropped them.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from signoff.model import StoreError

log = logging.getLogger("signoff.store")

SYNCHRONOUS = {"NORMAL": 1, "FULL": 2, "EXTRA": 3}

# The append-only guards of the audit table. Created by the first migration, and recreated
# by every open when missing (:func:`migrate`): whoever can write the file can drop them, and
# nothing else would notice until the next `signoff db check`.
AUDIT_TRIGGER_SQL = {
    "audit_no_update": """CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
       BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END""",
    "audit_no_delete": """CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
       BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END""",
}

_V1 = (
    """CREATE TABLE requests (
        id         TEXT PRIMARY KEY,
        kind       TEXT NOT NULL,
        thread     TEXT NOT NULL,
        status     TEXT NOT NULL
                   CHECK (status IN ('pending', 'resolved', 'expired', 'cancelled')),
        created_at REAL NOT NULL,   -- unix seconds
        due_at     REAL NOT NULL,   -- unix seconds: escalation or deadline, for the sweeper
        version    INTEGER NOT NULL,
        doc        TEXT NOT NULL    -- ApprovalRequest JSON, the truth; columns are for indexes
    )""",
    "CREATE INDEX requests_due ON requests (due_at) WHERE status = 'pending'",
    "CREATE INDEX requests_thread ON requests (thread)",
    "CREATE INDEX requests_status_created ON requests (status, created_at)",
    """CREATE TABLE call_keys (
        thread       TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        request_id   TEXT NOT NULL REFERENCES requests (id),
        fingerprint  TEXT NOT NULL,  -- sha256 of canonical {name, args}
        PRIMARY KEY (thread, tool_call_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE thread_grants (
        thread       TEXT NOT NULL,
        request_id   TEXT NOT NULL REFERENCES requests (id),
        tool_call_id TEXT NOT NULL,
        approver     TEXT NOT NULL,
        at           TEXT NOT NULL,
        PRIMARY KEY (thread, request_id, tool_call_id, approver)
    ) WITHOUT ROWID""",
    """CREATE TABLE audit (
        seq          INTEGER PRIMARY KEY,
        event        TEXT NOT NULL,
        at           TEXT NOT NULL,  -- ISO-8601 UTC, fixed width: text order is time order
        request_id   TEXT,
        thread       TEXT,
        tool         TEXT,
        tool_call_id TEXT,
        actor        TEXT,
        principal    TEXT,
        agent        TEXT,
        rule         TEXT,
        policy_hash  TEXT,
        data         TEXT NOT NULL,
        prev_hash    TEXT NOT NULL,
        hash         TEXT NOT NULL,
        origin       TEXT            -- which store instance wrote it; outside the hash
    )""",
    "CREATE INDEX audit_request ON audit (request_id) WHERE request_id IS NOT NULL",
    "CREATE INDEX audit_tool_event_at ON audit (tool, event, at)",
    *AUDIT_TRIGGER_SQL.values(),
)


def _v1(conn: sqlite3.Connection) -> None:
    for statement in _V1:
        conn.execute(statement)


_V2 = (
    """CREATE TABLE outbox (
        id          TEXT PRIMARY KEY,  -- deterministic: also the provider's idempotency key
        request_id  TEXT NOT NULL REFERENCES requests (id),
        channel     TEXT NOT NULL,
        kind        TEXT NOT NULL
                    CHECK (kind IN ('prompt', 'reminder', 'escalation', 'update', 'event')),
        recipient   TEXT NOT NULL,
        person      TEXT,
        data        TEXT NOT NULL,     -- JSON
        status      TEXT NOT NULL
                    CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'cancelled')),
        attempts    INTEGER NOT NULL DEFAULT 0,
        created_at  REAL NOT NULL,     -- unix seconds
        next_at     REAL NOT NULL,     -- unix seconds: when a pending row is due
        lease_until REAL,              -- unix seconds: when a sending row may be claimed again
        ref         TEXT,              -- JSON: the provider's message reference
        error       TEXT
    )""",
    "CREATE INDEX outbox_due ON outbox (next_at) WHERE status = 'pending'",
    "CREATE INDEX outbox_leased ON outbox (lease_until) WHERE status = 'sending'",
    "CREATE INDEX outbox_request ON outbox (request_id)",
)


def _v2(conn: sqlite3.Connection) -> None:
    """The notification outbox (written with the request, claimed under a lease)."""
    for statement in _V2:
        conn.execute(statement)


_V3 = (
    # Unreadable rows are marked, not fatal (store/_quarantine.py): unix seconds, and why.
    "ALTER TABLE requests ADD COLUMN quarantined_at REAL",
    "ALTER TABLE requests ADD COLUMN quarantine_reason TEXT",
    # The sweeper's index leaves quarantined rows out; it also counts pending requests for
    # /metrics without touching the table (a partial index holds exactly those rows).
    "DROP INDEX requests_due",
    "CREATE INDEX requests_due ON requests (due_at) "
    "WHERE status = 'pending' AND quarantined_at IS NULL",
    "CREATE INDEX requests_quarantined ON requests (quarantined_at) "
    "WHERE quarantined_at IS NOT NULL",
)


def _v3(conn: sqlite3.Connection) -> None:
    """Quarantine marks on request rows; the due index without quarantined rows."""
    for statement in _V3:
        conn.execute(statement)


_V4 = (
    # Grants (standing approvals, model/grants.py): the document is the truth, the columns
    # are for the indexes. Revoked and expired grants stay for the record.
    """CREATE TABLE grants (
        id            TEXT PRIMARY KEY,
        tool          TEXT NOT NULL,
        rule          TEXT NOT NULL,
        effect        TEXT NOT NULL CHECK (effect IN ('allow', 'deny')),
        scope         TEXT NOT NULL CHECK (scope IN ('thread', 'agent', 'principal', 'global')),
        principal     TEXT,
        agent         TEXT,
        thread        TEXT,
        created_at    REAL NOT NULL,              -- unix seconds
        expires_at    REAL NOT NULL,              -- unix seconds
        revoked_at    REAL,                       -- unix seconds
        expired_noted INTEGER NOT NULL DEFAULT 0, -- 1 once its grant_expired event is written
        doc           TEXT NOT NULL               -- Grant JSON, the truth
    )""",
    # The gate's cache load (active grants) and the sweeper's expiry pass (not yet noted).
    "CREATE INDEX grants_active ON grants (expires_at) WHERE revoked_at IS NULL",
    "CREATE INDEX grants_unnoted ON grants (expires_at) "
    "WHERE revoked_at IS NULL AND expired_noted = 0",
    "CREATE INDEX grants_created ON grants (created_at)",
    # One row bumped by every create or revoke, in the same transaction: what every gate
    # polls (one read) to know another process changed the grants.
    """CREATE TABLE grants_version (
        id      INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL
    )""",
    "INSERT INTO grants_version (id, version) VALUES (1, 0)",
    # Thread approvals had no rule, agent or expiry: they cannot become grants that keep to
    # what the approver saw, so they end here (docs/deploy.md, upgrade notes).
    "DROP TABLE thread_grants",
)


def _v4(conn: sqlite3.Connection) -> None:
    """Grants replace thread approvals; the grants version row."""
    for statement in _V4:
        conn.execute(statement)


def _v5(conn: sqlite3.Connection) -> None:
    """A random secret of this store: it keys the digests of secret arguments when the
    config has no ``audit.key`` (see signoff/policy/redact.py)."""
    conn.execute("CREATE TABLE store_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        "INSERT INTO store_secrets (name, value) VALUES ('redaction_salt', ?)",
        (secrets.token_hex(32),),
    )


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5)
AUDIT_TRIGGERS = tuple(AUDIT_TRIGGER_SQL)
SCHEMA_VERSION = len(MIGRATIONS)


@contextmanager
def sqlite_errors(path: str, doing: str) -> Iterator[None]:
    """Turn sqlite3 errors into :class:`StoreError` with a message saying what to do."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(path, doing, exc) from exc


def store_error(path: str, doing: str, exc: sqlite3.Error) -> StoreError:
    """The :class:`StoreError` :func:`sqlite_errors` raises for ``exc`` (for hot writer jobs,
    which catch ``sqlite3.Error`` themselves: no generator context manager per job)."""
    return StoreError(f"SQLite store {path}: {doing} failed: {exc}{_hint(exc)}")


def _hint(exc: sqlite3.Error) -> str:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return (
            " — another process held the database's write lock longer than the busy timeout; "
            "retry, or raise busy_timeout_ms"
        )
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return " — the file is damaged or is not a signoff database; restore it from a backup"
    if "disk" in text or "i/o" in text or "full" in text or "readonly" in text:
        return " — check that the disk is writable and not full"
    return ""


def connect(
    path: str, *, busy_timeout_ms: int, synchronous: str | None, query_only: bool = False
) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN ourselves) with signoff's pragmas."""
    conn = sqlite3.connect(
        path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if synchronous is not None:
            conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[synchronous]}")
        if query_only:
            conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


class Prepared(NamedTuple):
    """What opening did to the schema: its version, and the audit triggers it recreated."""

    version: int
    recreated_triggers: tuple[str, ...] = ()


def prepare(conn: sqlite3.Connection, path: str, synchronous: str) -> Prepared:
    """Switch to WAL, migrate, recreate missing audit triggers, and check the settings
    durability depends on.

    A ``kill -9`` cannot tell FULL from OFF, so the settings are asserted here instead of
    trusted (see research/durability-scale.md §3).
    """
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(
            f"SQLite store {path}: could not switch to WAL (journal_mode is {mode}); "
            "the file must be on a local filesystem that supports shared memory"
        )
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    if level != SYNCHRONOUS[synchronous]:
        raise StoreError(f"SQLite store {path}: synchronous is {level}, expected {synchronous}")
    return migrate(conn, path)


def migrate(conn: sqlite3.Connection, path: str) -> Prepared:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"SQLite store {path} has schema version {version}, newer than this signoff "
                f"understands ({SCHEMA_VERSION}); upgrade signoff"
            )
        for step in MIGRATIONS[version:]:
            step(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        recreated = restore_audit_triggers(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if recreated:
        log.warning(
            "the audit log's append-only triggers were missing and have been recreated; "
            "run `signoff audit verify` (with the checkpoints) to see what changed meanwhile",
            extra={"store": path, "triggers": list(recreated)},
        )
    return Prepared(SCHEMA_VERSION, recreated)


def restore_audit_triggers(conn: sqlite3.Connection) -> tuple[str, ...]:
    """Create the audit triggers that are missing (inside the caller's write transaction)."""
    found = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit'"
        )
    }
    missing = tuple(name for name in AUDIT_TRIGGERS if name not in found)
    for name in missing:
        conn.execute(AUDIT_TRIGGER_SQL[name])
    return missing
