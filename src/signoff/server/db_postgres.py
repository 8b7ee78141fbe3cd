"""``PostgresServerDB``: tokens, sessions and links beside a PostgreSQL store.

Every replica of ``signoff serve`` reads the same rows, so a token created with ``signoff
token create`` works on all of them at once, a browser session survives a load balancer
sending it elsewhere, and a one-click link is consumed exactly once whichever replica gets
it (one conditional ``UPDATE``). The tables sit in the store's schema (``server_*``), with
their own version in ``server_meta`` so the store and the server migrate independently;
statements run on the store's connections (:meth:`PostgresStore.run`).
"""

from __future__ import annotations

import secrets
from typing import Any

from psycopg import AsyncConnection, sql

from signoff.model import StoreError
from signoff.server.records import LinkRecord, SessionRecord, TokenRecord
from signoff.store._pg_schema import grant_to_granted
from signoff.store.postgres import PostgresStore

Conn = AsyncConnection[tuple[Any, ...]]

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE {s}.server_tokens (
            id            text PRIMARY KEY,
            token_hash    text NOT NULL UNIQUE,   -- sha256 of the bearer token
            kind          text NOT NULL CHECK (kind IN ('agent', 'approver')),
            subject       text NOT NULL,
            trusted_roles boolean NOT NULL DEFAULT false,
            label         text,
            created_at    double precision NOT NULL,
            revoked_at    double precision
        )""",
        """CREATE TABLE {s}.server_sessions (
            id_hash    text PRIMARY KEY,
            subject    text NOT NULL,
            token_id   text,
            created_at double precision NOT NULL,
            expires_at double precision NOT NULL
        )""",
        "CREATE INDEX server_sessions_token ON {s}.server_sessions (token_id)",
        """CREATE TABLE {s}.server_links (
            token_hash text PRIMARY KEY,
            purpose    text NOT NULL CHECK (purpose IN ('login', 'review', 'approve', 'reject')),
            request_id text,
            approver   text NOT NULL,
            created_at double precision NOT NULL,
            expires_at double precision NOT NULL,
            used_at    double precision
        )""",
        """CREATE INDEX server_links_request
           ON {s}.server_links (request_id, approver) WHERE used_at IS NULL""",
    ),
    (  # 2: one row every change to the tokens table bumps (a trigger: any writer, any replica)
        """CREATE TABLE {s}.server_token_changes (
            id      integer PRIMARY KEY CHECK (id = 1),
            version bigint NOT NULL
        )""",
        "INSERT INTO {s}.server_token_changes (id, version) VALUES (1, 0)",
        """CREATE FUNCTION {s}.server_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE {s}.server_token_changes SET version = version + 1 WHERE id = 1;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER server_tokens_changed AFTER INSERT OR UPDATE OR DELETE
           ON {s}.server_tokens FOR EACH STATEMENT EXECUTE FUNCTION {s}.server_tokens_changed()""",
        # Roles already granted the tokens table (`signoff db upgrade --grant`) may bump and
        # read the row too, so replicas keep working after the upgrade without a second grant.
        grant_to_granted(
            "SELECT, UPDATE", "server_token_changes", like="server_tokens", holding="UPDATE"
        ),
    ),
)

_TOKEN = "id, token_hash, kind, subject, created_at, trusted_roles, label, revoked_at"
_LINK = "token_hash, purpose, approver, created_at, expires_at, request_id, used_at"


class PostgresServerDB:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self._s = sql.Identifier(store.schema)
        self._secret: bytes | None = None
        self.token_writes = 0

    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=self._s, schema=sql.Literal(self.store.schema))

    async def _rows(self, text: str, params: tuple[Any, ...], doing: str) -> list[Any]:
        async def job(conn: Conn) -> list[Any]:
            cur = await conn.execute(self._q(text), params)
            return await cur.fetchall() if cur.description else [cur.rowcount]

        write = not text.lstrip().upper().startswith("SELECT")
        return await self.store.run(job, doing=doing, write=write)

    async def open(self) -> None:
        if self._secret is None:
            self._secret = await self.store.run(self._migrate, doing="migrating server tables")

    async def _current(self, conn: Conn) -> tuple[int, bytes | None]:
        """(schema version, secret) without DDL, so a role that may not create tables can
        start once the owner has migrated (``signoff db upgrade``)."""
        cur = await conn.execute(
            "SELECT to_regclass(format('%%I.server_meta', %s::text)) IS NOT NULL",
            (self.store.schema,),
        )
        row = await cur.fetchone()
        if not row or not row[0]:
            return 0, None
        cur = await conn.execute(self._q("SELECT key, value FROM {s}.server_meta"))
        meta: dict[str, str] = dict(await cur.fetchall())
        secret = bytes.fromhex(meta["secret"]) if "secret" in meta else None
        return int(meta.get("schema_version", 0)), secret

    async def _migrate(self, conn: Conn) -> bytes:
        """Create or upgrade the tables, under a lock so replicas do not race (taken before
        BEGIN, as in the store's own migrations); returns the shared server secret."""
        version, secret = await self._current(conn)
        if version == len(_MIGRATIONS) and secret is not None:
            return secret
        key = (f"signoff:server-migrate:{self.store.schema}",)
        await conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", key)
        try:
            async with conn.transaction():
                await conn.execute(self._q("CREATE SCHEMA IF NOT EXISTS {s}"))
                await conn.execute(
                    self._q(
                        "CREATE TABLE IF NOT EXISTS {s}.server_meta "
                        "(key text PRIMARY KEY, value text NOT NULL)"
                    )
                )
                meta = self._q("SELECT value FROM {s}.server_meta WHERE key = %s")
                row = await (await conn.execute(meta, ("schema_version",))).fetchone()
                version = int(row[0]) if row else 0
                if version > len(_MIGRATIONS):
                    raise StoreError(
                        f"the server tables have schema version {version}, newer than this "
                        f"signoff understands ({len(_MIGRATIONS)}); upgrade signoff"
                    )
                for statements in _MIGRATIONS[version:]:
                    for statement in statements:
                        await conn.execute(self._q(statement))
                await conn.execute(
                    self._q(
                        "INSERT INTO {s}.server_meta (key, value) VALUES "
                        "('schema_version', %s), ('secret', %s) ON CONFLICT (key) DO UPDATE "
                        "SET value = CASE WHEN {s}.server_meta.key = 'secret' "
                        "THEN {s}.server_meta.value ELSE excluded.value END"
                    ),
                    (str(len(_MIGRATIONS)), secrets.token_hex(32)),
                )
                row = await (await conn.execute(meta, ("secret",))).fetchone()
        finally:
            if not conn.closed:
                await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", key)
        assert row is not None
        return bytes.fromhex(row[0])

    async def close(self) -> None:
        return None  # the connections are the store's; the gate closes it

    async def secret(self) -> bytes:
        await self.open()
        assert self._secret is not None
        return self._secret

    # ---------------------------------------------------------------- tokens
    async def add_token(self, record: TokenRecord) -> None:
        try:
            await self._add_token(record)
        finally:
            self.token_writes += 1  # after the commit: see TokenCache

    async def _add_token(self, record: TokenRecord) -> None:
        await self._rows(
            f"INSERT INTO {{s}}.server_tokens ({_TOKEN}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
            (
                record.id,
                record.token_hash,
                record.kind,
                record.subject,
                record.created_at,
                record.trusted_roles,
                record.label,
                record.revoked_at,
            ),
            "storing a token",
        )

    async def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        rows = await self._rows(
            f"SELECT {_TOKEN} FROM {{s}}.server_tokens WHERE token_hash = %s",
            (token_hash,),
            "reading a token",
        )
        return TokenRecord(*rows[0]) if rows else None

    async def list_tokens(self) -> list[TokenRecord]:
        rows = await self._rows(
            f"SELECT {_TOKEN} FROM {{s}}.server_tokens ORDER BY created_at", (), "listing tokens"
        )
        return [TokenRecord(*row) for row in rows]

    async def tokens_version(self) -> int:
        rows = await self._rows(
            "SELECT version FROM {s}.server_token_changes WHERE id = 1", (), "reading tokens"
        )
        return int(rows[0][0])

    async def revoke_token(self, token_id: str, now: float) -> bool:
        try:
            return await self._revoke_token(token_id, now)
        finally:
            self.token_writes += 1  # after the commit: see TokenCache

    async def _revoke_token(self, token_id: str, now: float) -> bool:
        (count,) = await self._rows(
            "WITH t AS (UPDATE {s}.server_tokens SET revoked_at = %s "
            "  WHERE id = %s AND revoked_at IS NULL RETURNING id), "
            "d AS (DELETE FROM {s}.server_sessions WHERE token_id = %s) "
            "SELECT count(*) FROM t",
            (now, token_id, token_id),
            "revoking a token",
        )
        return bool(count[0])

    # ---------------------------------------------------------------- sessions
    async def add_session(self, record: SessionRecord) -> None:
        await self._rows(
            "INSERT INTO {s}.server_sessions (id_hash, subject, token_id, created_at, "
            "expires_at) VALUES (%s,%s,%s,%s,%s)",
            (record.id_hash, record.subject, record.token_id, record.created_at, record.expires_at),
            "storing a session",
        )

    async def session_by_hash(self, id_hash: str, now: float) -> SessionRecord | None:
        rows = await self._rows(
            "SELECT s.id_hash, s.subject, s.created_at, s.expires_at, s.token_id "
            "FROM {s}.server_sessions s LEFT JOIN {s}.server_tokens t ON t.id = s.token_id "
            "WHERE s.id_hash = %s AND s.expires_at > %s "
            "AND (s.token_id IS NULL OR t.revoked_at IS NULL)",
            (id_hash, now),
            "reading a session",
        )
        return SessionRecord(*rows[0]) if rows else None

    async def delete_session(self, id_hash: str) -> None:
        await self._rows(
            "DELETE FROM {s}.server_sessions WHERE id_hash = %s", (id_hash,), "ending a session"
        )

    # ---------------------------------------------------------------- links
    async def add_link(self, record: LinkRecord) -> None:
        await self._rows(
            f"INSERT INTO {{s}}.server_links ({_LINK}) VALUES (%s,%s,%s,%s,%s,%s,%s)",
            (
                record.token_hash,
                record.purpose,
                record.approver,
                record.created_at,
                record.expires_at,
                record.request_id,
                record.used_at,
            ),
            "storing a link",
        )

    async def link_by_hash(self, token_hash: str) -> LinkRecord | None:
        rows = await self._rows(
            f"SELECT {_LINK} FROM {{s}}.server_links WHERE token_hash = %s",
            (token_hash,),
            "reading a link",
        )
        return LinkRecord(*rows[0]) if rows else None

    async def consume_link(self, token_hash: str, now: float) -> LinkRecord | None:
        rows = await self._rows(
            f"UPDATE {{s}}.server_links SET used_at = %s WHERE token_hash = %s "
            f"AND used_at IS NULL AND expires_at > %s RETURNING {_LINK}",
            (now, token_hash, now),
            "using a link",
        )
        return LinkRecord(*rows[0]) if rows else None

    async def release_link(self, token_hash: str) -> None:
        await self._rows(
            "UPDATE {s}.server_links SET used_at = NULL WHERE token_hash = %s",
            (token_hash,),
            "releasing a link",
        )

    async def burn_links(self, request_id: str, approver: str, now: float) -> int:
        (count,) = await self._rows(
            "UPDATE {s}.server_links SET used_at = %s "
            "WHERE request_id = %s AND approver = %s AND used_at IS NULL",
            (now, request_id, approver),
            "using up links",
        )
        return int(count)
