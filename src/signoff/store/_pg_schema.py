"""Schema and migrations of the PostgreSQL store (``signoff db upgrade``, and every start-up).

Everything lives in one schema (``signoff`` by default, ``?schema=`` in the URL), so signoff
can share a database with the application and tests can run side by side. ``MIGRATIONS[i]``
takes the schema from version ``i`` to ``i + 1``; :func:`migrate` applies the missing ones in
one transaction under an advisory lock, so replicas starting together do not race: the first
migrates, the others wait for it and then find nothing to do.

The audit log is append-only three times over: triggers refuse UPDATE, DELETE and TRUNCATE
(for every role, superusers included, unless they disable the triggers); the privileges to do
them are revoked from PUBLIC and from the owner; and the hash chain makes any edit that gets
past both visible to ``signoff audit verify``.

The chain is extended *inside the database* by ``audit_append``: the Python side sends each
event's canonical JSON cut around ``prev_hash`` and ``seq`` (see :mod:`._pg_audit`), and the
function locks the one-row ``audit_head``, fills both in, hashes with ``sha256`` and inserts.
That makes create + audit and decide + audit + NOTIFY single statements, and holds the chain's
lock only from that statement to its COMMIT — not across a client round trip.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, sql

from signoff.model import StoreError
from signoff.store.audit import GENESIS_HASH

# The audit table's append-only guards: created by the first migration; ``signoff db upgrade``
# (as the owner) recreates or re-enables them (:func:`repair_audit_triggers`).
_AUDIT_REFUSE = """FUNCTION {s}.audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        RAISE EXCEPTION 'audit log is append-only (% refused)', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END
    $fn$"""
_AUDIT_TRIGGER_SQL = {
    "audit_no_update_or_delete": """CREATE TRIGGER audit_no_update_or_delete
       BEFORE UPDATE OR DELETE ON {s}.audit
       FOR EACH ROW EXECUTE FUNCTION {s}.audit_refuse()""",
    "audit_no_truncate": """CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON {s}.audit
       FOR EACH STATEMENT EXECUTE FUNCTION {s}.audit_refuse()""",
}
_AUDIT_REVOKES = (
    "REVOKE UPDATE, DELETE, TRUNCATE ON {s}.audit FROM PUBLIC",
    "REVOKE UPDATE, DELETE, TRUNCATE ON {s}.audit FROM CURRENT_USER",
)

_V1 = (
    """CREATE TABLE {s}.requests (
        id            text PRIMARY KEY,
        kind          text NOT NULL,
        thread        text NOT NULL,
        status        text NOT NULL
                      CHECK (status IN ('pending', 'resolved', 'expired', 'cancelled')),
        created_at    timestamptz NOT NULL,
        due_at        timestamptz NOT NULL,  -- escalation or deadline, for the sweeper
        version       integer NOT NULL,
        doc           json NOT NULL,         -- ApprovalRequest JSON, the truth
        claimed_by    text,                  -- sweeper lease: which store instance ...
        claimed_until timestamptz            -- ... may expire it until when (database clock)
    )""",
    "CREATE INDEX requests_due ON {s}.requests (due_at) WHERE status = 'pending'",
    "CREATE INDEX requests_thread ON {s}.requests (thread)",
    "CREATE INDEX requests_status_created ON {s}.requests (status, created_at)",
    "CREATE INDEX requests_created ON {s}.requests (created_at)",
    """CREATE TABLE {s}.call_keys (
        thread       text NOT NULL,
        tool_call_id text NOT NULL,
        request_id   text NOT NULL REFERENCES {s}.requests (id),
        fingerprint  text NOT NULL,  -- sha256 of canonical {{name, args}}
        PRIMARY KEY (thread, tool_call_id)
    )""",
    """CREATE TABLE {s}.thread_grants (
        thread       text NOT NULL,
        request_id   text NOT NULL REFERENCES {s}.requests (id),
        tool_call_id text NOT NULL,
        approver     text NOT NULL,
        at           timestamptz NOT NULL,
        PRIMARY KEY (thread, request_id, tool_call_id, approver)
    )""",
    """CREATE TABLE {s}.audit (
        seq          bigint PRIMARY KEY,
        event        text NOT NULL,
        at           timestamptz NOT NULL,
        request_id   text,
        thread       text,
        tool         text,
        tool_call_id text,
        actor        text,
        principal    text,
        agent        text,
        rule         text,
        policy_hash  text,
        data         json NOT NULL,
        prev_hash    text NOT NULL,
        hash         text NOT NULL,
        origin       text            -- which store instance wrote it; outside the hash
    )""",
    "CREATE INDEX audit_request ON {s}.audit (request_id) WHERE request_id IS NOT NULL",
    "CREATE INDEX audit_tool_event_at ON {s}.audit (tool, event, at)",
    """CREATE TABLE {s}.audit_head (
        id   integer PRIMARY KEY CHECK (id = 1),
        seq  bigint NOT NULL,
        hash text NOT NULL
    )""",
    "INSERT INTO {s}.audit_head (id, seq, hash) VALUES (1, 0, {genesis})",
    """CREATE FUNCTION {s}.audit_append(entries json, writer text) RETURNS bigint
    LANGUAGE plpgsql AS $fn$
    DECLARE
        head_seq  bigint;
        head_hash text;
        e         record;
        digest    text;
    BEGIN
        SELECT seq, hash INTO head_seq, head_hash FROM {s}.audit_head WHERE id = 1 FOR UPDATE;
        FOR e IN SELECT * FROM json_to_recordset(entries) AS x(
            p text, m text, s text, event text, at timestamptz, request_id text, thread text,
            tool text, tool_call_id text, actor text, principal text, agent text, rule text,
            policy_hash text, data json)
        LOOP
            head_seq := head_seq + 1;
            digest := encode(sha256(convert_to(
                e.p || head_hash || e.m || head_seq::text || e.s, 'UTF8')), 'hex');
            INSERT INTO {s}.audit (seq, event, at, request_id, thread, tool, tool_call_id,
                actor, principal, agent, rule, policy_hash, data, prev_hash, hash, origin)
            VALUES (head_seq, e.event, e.at, e.request_id, e.thread, e.tool, e.tool_call_id,
                e.actor, e.principal, e.agent, e.rule, e.policy_hash, e.data, head_hash,
                digest, writer);
            head_hash := digest;
        END LOOP;
        UPDATE {s}.audit_head SET seq = head_seq, hash = head_hash WHERE id = 1;
        RETURN head_seq;
    END
    $fn$""",
    "CREATE " + _AUDIT_REFUSE,
    *_AUDIT_TRIGGER_SQL.values(),
    *_AUDIT_REVOKES,
)


def grant_to_granted(
    privileges: str, tables: str, *, like: str = "requests", holding: str = "INSERT"
) -> str:
    """Migration text (with ``{s}``/``{schema}`` placeholders): a DO block giving
    ``privileges`` on ``tables`` (comma-separated, in this schema) to every role, besides the
    owner, already granted ``holding`` on ``like`` (``signoff db upgrade --grant``), so
    replicas keep working after an upgrade without a second grant."""
    on = ", ".join(f"%I.{table.strip()}" for table in tables.split(","))
    schemas = ", ".join("{schema}" for _ in tables.split(","))
    return f"""DO $do$
    DECLARE r text;
    BEGIN
        FOR r IN SELECT DISTINCT grantee FROM information_schema.role_table_grants
                 WHERE table_schema = {{schema}} AND table_name = '{like}'
                   AND privilege_type = '{holding}' AND grantee <> current_user
                   AND grantee <> 'PUBLIC'
        LOOP
            EXECUTE format('GRANT {privileges} ON {on} TO %I', {schemas}, r);
        END LOOP;
    END
    $do$"""


_V2 = (
    """CREATE TABLE {s}.outbox (
        id          text PRIMARY KEY,  -- deterministic: also the provider's idempotency key
        request_id  text NOT NULL REFERENCES {s}.requests (id),
        channel     text NOT NULL,
        kind        text NOT NULL
                    CHECK (kind IN ('prompt', 'reminder', 'escalation', 'update', 'event')),
        recipient   text NOT NULL,
        person      text,
        data        jsonb NOT NULL,
        status      text NOT NULL
                    CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'cancelled')),
        attempts    integer NOT NULL DEFAULT 0,
        created_at  timestamptz NOT NULL,
        next_at     timestamptz NOT NULL,  -- when a pending row is due
        lease_until timestamptz,           -- when a sending row may be claimed again
        ref         jsonb,                 -- the provider's message reference
        error       text
    )""",
    "CREATE INDEX outbox_due ON {s}.outbox (next_at, id) WHERE status = 'pending'",
    "CREATE INDEX outbox_leased ON {s}.outbox (lease_until) WHERE status = 'sending'",
    "CREATE INDEX outbox_request ON {s}.outbox (request_id)",
    # Roles already granted the request tables (``signoff db upgrade --grant``) get the
    # outbox too, so replicas keep working after the upgrade without a second grant.
    grant_to_granted("SELECT, INSERT, UPDATE", "outbox"),
)

_V3 = (
    # Unreadable rows are marked, not fatal (store/_quarantine.py); every replica sees it.
    "ALTER TABLE {s}.requests ADD COLUMN quarantined_at timestamptz",
    "ALTER TABLE {s}.requests ADD COLUMN quarantine_reason text",
    # The sweeper's index leaves quarantined rows out; it also answers /metrics' pending count.
    "DROP INDEX {s}.requests_due",
    "CREATE INDEX requests_due ON {s}.requests (due_at) "
    "WHERE status = 'pending' AND quarantined_at IS NULL",
    "CREATE INDEX requests_quarantined ON {s}.requests (quarantined_at) "
    "WHERE quarantined_at IS NOT NULL",
)

_V4 = (
    # Grants (standing approvals, model/grants.py): the document is the truth, the columns
    # are for the indexes. Revoked and expired grants stay for the record.
    """CREATE TABLE {s}.grants (
        id            text PRIMARY KEY,
        tool          text NOT NULL,
        rule          text NOT NULL,
        effect        text NOT NULL CHECK (effect IN ('allow', 'deny')),
        scope         text NOT NULL CHECK (scope IN ('thread', 'agent', 'principal', 'global')),
        principal     text,
        agent         text,
        thread        text,
        created_at    timestamptz NOT NULL,
        expires_at    timestamptz NOT NULL,
        revoked_at    timestamptz,
        expired_noted boolean NOT NULL DEFAULT false,  -- its grant_expired event is written
        doc           json NOT NULL                    -- Grant JSON, the truth
    )""",
    # The gates' cache loads (active grants) and the sweepers' expiry pass (not yet noted).
    "CREATE INDEX grants_active ON {s}.grants (expires_at) WHERE revoked_at IS NULL",
    "CREATE INDEX grants_unnoted ON {s}.grants (expires_at) "
    "WHERE revoked_at IS NULL AND NOT expired_noted",
    "CREATE INDEX grants_created ON {s}.grants (created_at)",
    # One row bumped by every create or revoke, in the same statement: what every replica's
    # gate polls (one read) to know the grants changed anywhere.
    """CREATE TABLE {s}.grants_version (
        id      integer PRIMARY KEY CHECK (id = 1),
        version bigint NOT NULL
    )""",
    "INSERT INTO {s}.grants_version (id, version) VALUES (1, 0)",
    # Thread approvals had no rule, agent or expiry: they cannot become grants that keep to
    # what the approver saw, so they end here (docs/deploy.md, upgrade notes).
    "DROP TABLE {s}.thread_grants",
    # Roles already granted the request tables (``signoff db upgrade --grant``) get the
    # grant tables too, so replicas keep working after the upgrade without a second grant.
    grant_to_granted("SELECT, INSERT, UPDATE", "grants, grants_version"),
)

_V5 = (
    # A random secret of this store: it keys the digests of secret arguments when the config
    # has no audit.key (signoff/policy/redact.py). gen_random_uuid() draws from the server's
    # strong random source; three of them hashed give 256 bits.
    "CREATE TABLE {s}.store_secrets (name text PRIMARY KEY, value text NOT NULL)",
    """INSERT INTO {s}.store_secrets (name, value) VALUES ('redaction_salt',
        encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text
                                 || gen_random_uuid()::text, 'UTF8')), 'hex'))""",
    # Roles already granted the request tables may read it (replicas keep working).
    grant_to_granted("SELECT", "store_secrets"),
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5)
AUDIT_TRIGGERS = tuple(_AUDIT_TRIGGER_SQL)
SCHEMA_VERSION = len(MIGRATIONS)

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


def _q(template: str, schema: str, t: sql.Composable | None = None) -> sql.Composed:
    return sql.SQL(template).format(
        s=sql.Identifier(schema),
        schema=sql.Literal(schema),
        genesis=sql.Literal(GENESIS_HASH),
        **({"t": t} if t is not None else {}),
    )


async def current_version(conn: AsyncConnection[Any], schema: str) -> int:
    """The schema's version; 0 when signoff's tables are not there yet."""
    cur = await conn.execute(
        "SELECT to_regclass(format('%%I.schema_migrations', %s::text)) IS NOT NULL", (schema,)
    )
    row = await cur.fetchone()
    if not row or not row[0]:
        return 0
    cur = await conn.execute(
        _q("SELECT coalesce(max(version), 0) FROM {s}.schema_migrations", schema)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def migrate(conn: AsyncConnection[Any], schema: str) -> list[int]:
    """Bring ``schema`` to :data:`SCHEMA_VERSION`; returns the versions applied (maybe none).

    Needs an autocommit connection. Cheap when nothing is to do: one read, no lock, no DDL
    (so an application role without CREATE rights can start once the owner has migrated).
    """
    if await _checked(conn, schema) == SCHEMA_VERSION:
        return []
    # A session lock taken *before* BEGIN: the transaction then starts after the previous
    # holder committed, and sees its tables (a backend only refreshes its catalog caches at
    # transaction start or on relation locks, so an xact lock taken inside could miss them).
    key = (f"signoff:migrate:{schema}",)
    await conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", key)
    try:
        async with conn.transaction():
            return await _apply(conn, schema, await _checked(conn, schema))
    finally:
        if not conn.closed:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", key)


async def _apply(conn: AsyncConnection[Any], schema: str, version: int) -> list[int]:
    applied: list[int] = []
    if version < SCHEMA_VERSION:
        await conn.execute(_q("CREATE SCHEMA IF NOT EXISTS {s}", schema))
        await conn.execute(_q(_VERSION_TABLE, schema))
    for number, steps in enumerate(MIGRATIONS[version:], start=version + 1):
        for statement in steps:
            await conn.execute(_q(statement, schema))
        await conn.execute(
            _q("INSERT INTO {s}.schema_migrations (version) VALUES (%s)", schema), (number,)
        )
        applied.append(number)
    return applied


async def _checked(conn: AsyncConnection[Any], schema: str) -> int:
    version = await current_version(conn, schema)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"PostgreSQL schema {schema!r} is at version {version}, newer than this signoff "
            f"understands ({SCHEMA_VERSION}); upgrade signoff on every replica"
        )
    return version


# What a replica's role needs when it is not the owner (docs/deploy.md): read and write the
# request tables, append to the audit log (never UPDATE/DELETE/TRUNCATE it), and the server's
# token/session/link tables. Functions are executable by PUBLIC by default.
APP_GRANTS = (
    "GRANT USAGE ON SCHEMA {s} TO {role}",
    "GRANT SELECT ON {s}.schema_migrations TO {role}",
    "GRANT SELECT ON {s}.store_secrets TO {role}",
    "GRANT SELECT, INSERT, UPDATE ON {s}.requests, {s}.call_keys, {s}.grants, "
    "{s}.grants_version, {s}.audit_head, {s}.outbox TO {role}",
    "GRANT SELECT, INSERT ON {s}.audit TO {role}",
)
SERVER_GRANTS = (
    "GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.server_tokens, {s}.server_sessions, "
    "{s}.server_links TO {role}",
    "GRANT SELECT ON {s}.server_meta TO {role}",
    "GRANT SELECT, UPDATE ON {s}.server_token_changes TO {role}",  # bumped by a token trigger
)


async def grant(conn: AsyncConnection[Any], schema: str, role: str, *, server: bool) -> None:
    """Give ``role`` what a replica needs (and no more) in ``schema``."""
    for statement in APP_GRANTS + (SERVER_GRANTS if server else ()):
        await conn.execute(
            sql.SQL(statement).format(s=sql.Identifier(schema), role=sql.Identifier(role))
        )


_TRIGGER_STATE = """
SELECT t.tgname, t.tgenabled FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = 'audit' AND NOT t.tgisinternal
"""


async def audit_trigger_problems(conn: AsyncConnection[Any], schema: str) -> list[str]:
    """``missing NAME`` / ``NAME disabled`` for each append-only trigger not in force."""
    cur = await conn.execute(_TRIGGER_STATE, (schema,))
    found = {name: state for name, state in await cur.fetchall()}
    return [f"missing {name}" for name in AUDIT_TRIGGERS if name not in found] + [
        f"{name} disabled" for name in AUDIT_TRIGGERS if found.get(name) == "D"
    ]


async def repair_audit_triggers(conn: AsyncConnection[Any], schema: str) -> list[str]:
    """Recreate missing and re-enable disabled audit triggers, and revoke UPDATE, DELETE and
    TRUNCATE again; returns what was repaired. Needs the table's owner (an app role may not
    create triggers): ``signoff db upgrade`` runs it."""
    repaired: list[str] = []
    async with conn.transaction():
        for problem in await audit_trigger_problems(conn, schema):
            name = problem.split()[-1] if problem.startswith("missing") else problem.split()[0]
            if problem.startswith("missing"):
                await conn.execute(_q("CREATE OR REPLACE " + _AUDIT_REFUSE, schema))
                await conn.execute(_q(_AUDIT_TRIGGER_SQL[name], schema))
                repaired.append(f"recreated {name}")
            else:
                await conn.execute(
                    _q("ALTER TABLE {s}.audit ENABLE TRIGGER {t}", schema, sql.Identifier(name))
                )
                repaired.append(f"enabled {name}")
        for statement in _AUDIT_REVOKES:
            await conn.execute(_q(statement, schema))
    return repaired
