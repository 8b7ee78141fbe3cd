"""``SQLiteServerDB``: tokens, sessions and links in the SQLite store's file.

Its own tables (``signoff_server_*``) and its own schema version (in
``signoff_server_meta``, never the store's ``PRAGMA user_version``), so the store and the
server migrate independently. WAL lets lookups read while the store's writer commits;
lookups (one indexed row, microseconds) run inline, writes run in a worker thread because a
``synchronous=FULL`` commit waits for the disk.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from signoff.model import StoreError
from signoff.server.records import LinkRecord, SessionRecord, TokenRecord

T = TypeVar("T")

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE signoff_server_tokens (
            id            TEXT PRIMARY KEY,
            token_hash    TEXT NOT NULL UNIQUE,   -- sha256 of the bearer token
            kind          TEXT NOT NULL CHECK (kind IN ('agent', 'approver')),
            subject       TEXT NOT NULL,
            trusted_roles INTEGER NOT NULL DEFAULT 0,
            label         TEXT,
            created_at    REAL NOT NULL,
            revoked_at    REAL
        )""",
        """CREATE TABLE signoff_server_sessions (
            id_hash    TEXT PRIMARY KEY,
            subject    TEXT NOT NULL,
            token_id   TEXT,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX signoff_server_sessions_token ON signoff_server_sessions (token_id)",
        """CREATE TABLE signoff_server_links (
            token_hash TEXT PRIMARY KEY,
            purpose    TEXT NOT NULL CHECK (purpose IN ('login', 'review', 'approve', 'reject')),
            request_id TEXT,
            approver   TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used_at    REAL
        )""",
        """CREATE INDEX signoff_server_links_request
           ON signoff_server_links (request_id, approver) WHERE used_at IS NULL""",
    ),
    (  # 2: one row every change to the tokens table bumps (triggers: any writer, any process)
        """CREATE TABLE signoff_server_token_changes (
            id      INTEGER PRIMARY KEY CHECK (id = 1),
            version INTEGER NOT NULL
        )""",
        "INSERT INTO signoff_server_token_changes (id, version) VALUES (1, 0)",
        *(
            f"""CREATE TRIGGER signoff_server_tokens_{event.lower()} AFTER {event}
                ON signoff_server_tokens BEGIN
                UPDATE signoff_server_token_changes SET version = version + 1 WHERE id = 1;
            END"""
            for event in ("INSERT", "UPDATE", "DELETE")
        ),
    ),
)

_TOKEN_COLUMNS = "id, token_hash, kind, subject, created_at, trusted_roles, label, revoked_at"
_LINK_COLUMNS = "token_hash, purpose, approver, created_at, expires_at, request_id, used_at"


class SQLiteServerDB:
    def __init__(self, path: str, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._read_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._secret: bytes | None = None
        self.token_writes = 0

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                timeout=self.busy_timeout_ms / 1000,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise StoreError(f"server tables in {self.path}: cannot open: {exc}") from exc
        return conn

    async def open(self) -> None:
        if self._writer is not None:
            return
        await asyncio.to_thread(self._open_sync)

    def _open_sync(self) -> None:
        writer = self._connect()
        try:
            writer.execute("PRAGMA journal_mode = WAL")
            self._secret = _migrate(writer)
        except sqlite3.Error as exc:
            writer.close()
            raise StoreError(f"server tables in {self.path}: migration failed: {exc}") from exc
        except BaseException:
            writer.close()
            raise
        self._writer, self._reader = writer, self._connect()

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = None

    async def secret(self) -> bytes:
        await self.open()
        assert self._secret is not None
        return self._secret

    # ---------------------------------------------------------------- plumbing
    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self._reader is None:
            raise StoreError("server tables are not open")
        with self._read_lock:
            try:
                return self._reader.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"server tables in {self.path}: read failed: {exc}") from exc

    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            if self._writer is None:
                raise StoreError("server tables are not open")
            with self._write_lock:
                conn = self._writer
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = job(conn)
                        conn.execute("COMMIT")
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
                except sqlite3.Error as exc:
                    raise StoreError(f"server tables in {self.path}: write failed: {exc}") from exc
                return result

        return await asyncio.to_thread(run)

    # ---------------------------------------------------------------- tokens
    async def add_token(self, record: TokenRecord) -> None:
        try:
            await self._add_token(record)
        finally:
            self.token_writes += 1  # after the commit: see TokenCache

    async def _add_token(self, record: TokenRecord) -> None:
        await self._write(
            lambda c: c.execute(
                f"INSERT INTO signoff_server_tokens ({_TOKEN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
                (
                    record.id,
                    record.token_hash,
                    record.kind,
                    record.subject,
                    record.created_at,
                    int(record.trusted_roles),
                    record.label,
                    record.revoked_at,
                ),
            )
        )

    async def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        rows = self._read(
            f"SELECT {_TOKEN_COLUMNS} FROM signoff_server_tokens WHERE token_hash = ?",
            (token_hash,),
        )
        return _token(rows[0]) if rows else None

    async def list_tokens(self) -> list[TokenRecord]:
        rows = self._read(
            f"SELECT {_TOKEN_COLUMNS} FROM signoff_server_tokens ORDER BY created_at", ()
        )
        return [_token(r) for r in rows]

    async def tokens_version(self) -> int:
        rows = self._read("SELECT version FROM signoff_server_token_changes WHERE id = 1", ())
        return int(rows[0][0])

    async def revoke_token(self, token_id: str, now: float) -> bool:
        try:
            return await self._revoke_token(token_id, now)
        finally:
            self.token_writes += 1  # after the commit: see TokenCache

    async def _revoke_token(self, token_id: str, now: float) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE signoff_server_tokens SET revoked_at = ? "
                "WHERE id = ? AND revoked_at IS NULL",
                (now, token_id),
            )
            conn.execute("DELETE FROM signoff_server_sessions WHERE token_id = ?", (token_id,))
            return cur.rowcount == 1

        return await self._write(job)

    # ---------------------------------------------------------------- sessions
    async def add_session(self, record: SessionRecord) -> None:
        await self._write(
            lambda c: c.execute(
                "INSERT INTO signoff_server_sessions "
                "(id_hash, subject, token_id, created_at, expires_at) VALUES (?,?,?,?,?)",
                (
                    record.id_hash,
                    record.subject,
                    record.token_id,
                    record.created_at,
                    record.expires_at,
                ),
            )
        )

    async def session_by_hash(self, id_hash: str, now: float) -> SessionRecord | None:
        rows = self._read(
            "SELECT s.id_hash, s.subject, s.created_at, s.expires_at, s.token_id "
            "FROM signoff_server_sessions s "
            "LEFT JOIN signoff_server_tokens t ON t.id = s.token_id "
            "WHERE s.id_hash = ? AND s.expires_at > ? "
            "AND (s.token_id IS NULL OR t.revoked_at IS NULL)",
            (id_hash, now),
        )
        if not rows:
            return None
        h, subject, created, expires, token_id = rows[0]
        return SessionRecord(h, subject, created, expires, token_id)

    async def delete_session(self, id_hash: str) -> None:
        await self._write(
            lambda c: c.execute("DELETE FROM signoff_server_sessions WHERE id_hash = ?", (id_hash,))
        )

    # ---------------------------------------------------------------- links
    async def add_link(self, record: LinkRecord) -> None:
        await self._write(
            lambda c: c.execute(
                f"INSERT INTO signoff_server_links ({_LINK_COLUMNS}) VALUES (?,?,?,?,?,?,?)",
                (
                    record.token_hash,
                    record.purpose,
                    record.approver,
                    record.created_at,
                    record.expires_at,
                    record.request_id,
                    record.used_at,
                ),
            )
        )

    async def link_by_hash(self, token_hash: str) -> LinkRecord | None:
        rows = self._read(
            f"SELECT {_LINK_COLUMNS} FROM signoff_server_links WHERE token_hash = ?",
            (token_hash,),
        )
        return LinkRecord(*rows[0]) if rows else None

    async def consume_link(self, token_hash: str, now: float) -> LinkRecord | None:
        def job(conn: sqlite3.Connection) -> LinkRecord | None:
            cur = conn.execute(
                "UPDATE signoff_server_links SET used_at = ? "
                "WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?",
                (now, token_hash, now),
            )
            if cur.rowcount != 1:
                return None
            row = conn.execute(
                f"SELECT {_LINK_COLUMNS} FROM signoff_server_links WHERE token_hash = ?",
                (token_hash,),
            ).fetchone()
            return LinkRecord(*row)

        return await self._write(job)

    async def release_link(self, token_hash: str) -> None:
        await self._write(
            lambda c: c.execute(
                "UPDATE signoff_server_links SET used_at = NULL WHERE token_hash = ?",
                (token_hash,),
            )
        )

    async def burn_links(self, request_id: str, approver: str, now: float) -> int:
        def job(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE signoff_server_links SET used_at = ? "
                "WHERE request_id = ? AND approver = ? AND used_at IS NULL",
                (now, request_id, approver),
            )
            return int(cur.rowcount)

        return await self._write(job)


def _token(row: tuple[Any, ...]) -> TokenRecord:
    id_, h, kind, subject, created, trusted, label, revoked = row
    return TokenRecord(id_, h, kind, subject, created, bool(trusted), label, revoked)


def _migrate(conn: sqlite3.Connection) -> bytes:
    """Bring the server tables to the newest version; returns the server secret."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS signoff_server_meta "
            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        row = conn.execute(
            "SELECT value FROM signoff_server_meta WHERE key = 'schema_version'"
        ).fetchone()
        version = int(row[0]) if row else 0
        if version > len(_MIGRATIONS):
            raise StoreError(
                f"the server tables have schema version {version}, newer than this signoff "
                f"understands ({len(_MIGRATIONS)}); upgrade signoff"
            )
        for statements in _MIGRATIONS[version:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(
            "INSERT OR REPLACE INTO signoff_server_meta (key, value) VALUES ('schema_version', ?)",
            (str(len(_MIGRATIONS)),),
        )
        secret = conn.execute(
            "SELECT value FROM signoff_server_meta WHERE key = 'secret'"
        ).fetchone()
        if secret is None:
            value = secrets.token_hex(32)
            conn.execute(
                "INSERT INTO signoff_server_meta (key, value) VALUES ('secret', ?)", (value,)
            )
        else:
            value = secret[0]
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return bytes.fromhex(value)
